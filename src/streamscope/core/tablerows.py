"""Rows bound for one of a run file's tables, as they cross from the monitor to the store.

In: a table's name and its columns (equal length; numpy arrays or lists). Out: a frozen
``TableRows``, checked where it is made; the store checks its columns against the table's
declaration (``store/schema.py``) when it is handed over, before any is written.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:  # numpy is not imported for the name: a run's options build without it
    from numpy.typing import NDArray

Column: TypeAlias = "NDArray[Any] | Sequence[Any]"


@dataclass(frozen=True, slots=True)
class TableRows:
    """``len(self)`` rows of ``table``: one sequence per column, all of one length."""

    table: str
    columns: Mapping[str, Column]

    def __post_init__(self) -> None:
        if not self.columns:
            raise ValueError(f"rows for {self.table} need at least one column")
        lengths = {name: len(col) for name, col in self.columns.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"rows for {self.table} need columns of one length, got {lengths}")

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))


#: Where a producer of table rows hands them (the monitor's store writer).
TableSink = Callable[[TableRows], None]
