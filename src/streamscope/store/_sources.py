"""Where a ``Run`` reads its tables from: a run file's read-only connection, or an
``InMemoryStore``'s rows shaped as the file's would be.

In: a DuckDB connection or an in-memory store. Out: the results tables as sorted columns, the
drop counts, and a connection for SQL with nothing outside the run within reach (``CONFINED``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from streamscope.store import _rows, _sqlio
from streamscope.store.duck import duckdb

if TYPE_CHECKING:
    from streamscope.store.runstore import InMemoryStore

#: A run file is read with nothing outside it within reach: no other file (``read_csv``,
#: ``COPY … TO``, ``ATTACH``, ``glob``), no extension installed or loaded, no network, and these
#: settings locked (``streamscope sql`` runs whatever the user types).
CONFINED: dict[str, bool] = {
    "enable_external_access": False,
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "allow_community_extensions": False,
    "lock_configuration": True,
}


class RunSource(Protocol):
    """Where a ``Run`` reads its results tables from."""

    def columns(self, table: str, query_id: int | None, target: str | None) -> _rows.Columns:
        """``frame``, ``stat`` or ``histogram`` rows, filtered, sorted by ``_rows.SORT_KEYS``."""
        ...

    def drops(self) -> list[tuple[int, int, int, int]]: ...

    def connection(self) -> duckdb.DuckDBPyConnection: ...

    def close(self) -> None: ...


class DuckDBSource:
    """A run file's tables, through its read-only connection (or its writer's: ``owned``
    False, the connection then left open to its writer when the run is closed)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, *, owned: bool = True) -> None:
        self._con = con
        self._owned = owned

    def columns(self, table: str, query_id: int | None, target: str | None) -> _rows.Columns:
        return _sqlio.select_columns(self._con, table, query_id, target)

    def drops(self) -> list[tuple[int, int, int, int]]:
        return _sqlio.select(self._con, "drops")

    def connection(self) -> duckdb.DuckDBPyConnection:
        return self._con

    def close(self) -> None:
        if self._owned:
            self._con.close()


_COLUMNS = {
    "frame": _rows.FRAME_COLUMNS,
    "stat": _rows.STAT_COLUMNS,
    "histogram": _rows.HIST_COLUMNS,
}


class MemorySource:
    """An ``InMemoryStore``'s rows, shaped as a run file's tables would be."""

    def __init__(self, store: InMemoryStore) -> None:
        self._store = store
        self._con: duckdb.DuckDBPyConnection | None = None

    def _table(self, table: str) -> Sequence[tuple[Any, ...]]:
        s = self._store
        tables: dict[str, Sequence[tuple[Any, ...]]] = {
            "frame": s.frames,
            "stat": s.stats,
            "histogram": s.hists,
            "drops": s.drops,
            **s.tables,
        }
        return tables[table]

    def columns(self, table: str, query_id: int | None, target: str | None) -> _rows.Columns:
        rows = [
            r for r in self._table(table) if query_id in (None, r[0]) and target in (None, r[1])
        ]
        return _rows.columns(rows, _COLUMNS[table], table)

    def drops(self) -> list[tuple[int, int, int, int]]:
        return list(self._store.drops)

    def connection(self) -> duckdb.DuckDBPyConnection:
        """An in-memory DuckDB copy of the store, made on first use, so ``sql`` works in tests."""
        if self._con is None:
            s, con = self._store, duckdb.connect()
            assert s.meta is not None
            _sqlio.create(con, s.meta, s.topology, s.queries)
            _sqlio.set_status(con, s.status, s.error, s.ended_unix_ns, s.duration_ns)
            for table in ("frame", "stat", "histogram", "drops", *s.tables):
                _sqlio.insert(con, table, list(zip(*self._table(table), strict=True)))
            for key, value in CONFINED.items():
                con.execute(f"SET {key} = {str(value).lower()}")
            self._con = con
        return self._con

    def close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


__all__ = ["CONFINED", "DuckDBSource", "MemorySource", "RunSource"]
