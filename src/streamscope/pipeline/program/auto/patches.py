"""Standard library attributes replaced while a program is watched, and put back after.

In: a table of ``(owner, name) -> wrap``, each ``wrap`` taking the standard attribute and
giving the one to use instead. Out: ``Patches.apply`` (idempotent) and ``Patches.undo``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Wrap = Callable[[Any], Any]


class Patches:
    """One table of replacements: each attribute as the owner (a class or module) has it
    itself, replaced by what its ``wrap`` makes of it, until ``undo``."""

    def __init__(self, table: Mapping[tuple[Any, str], Wrap]) -> None:
        self.table = dict(table)
        #: What ``apply`` replaced, to put back (empty: not applied).
        self.saved: dict[tuple[Any, str], Any] = {}

    def apply(self) -> None:
        if self.saved:
            return
        for (owner, name), wrap in self.table.items():
            standard = vars(owner)[name]
            self.saved[owner, name] = standard
            setattr(owner, name, wrap(standard))

    def undo(self) -> None:
        for (owner, name), standard in self.saved.items():
            setattr(owner, name, standard)
        self.saved.clear()


__all__ = ["Patches", "Wrap"]
