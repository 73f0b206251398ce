"""DuckDB statements shared by the writer and the reader: create, bulk insert, select rows.

Table and column names only ever come from ``schema.TABLES``, never from input.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from streamscope.store import _rows
from streamscope.store.duck import duckdb
from streamscope.store.schema import FORMAT, SCHEMA_VERSION, TABLES, ddl

if TYPE_CHECKING:
    from streamscope.core.topology import Topology
    from streamscope.store.runstore import QueryRecord, RunMeta

_TABLE = {t.name: t for t in TABLES}
_DTYPES = {
    "INTEGER": np.int64,
    "BIGINT": np.int64,
    "DOUBLE": np.float64,
    "VARCHAR": object,
    "BOOLEAN": np.bool_,
}
_SELECT = {
    "frame": _rows.FRAME_COLUMNS,
    "stat": _rows.STAT_COLUMNS,
    "histogram": _rows.HIST_COLUMNS,
}


def create(
    con: duckdb.DuckDBPyConnection,
    meta: RunMeta,
    topology: Topology,
    queries: Sequence[QueryRecord],
    *,
    tables: bool = True,
) -> None:
    """Create every table (``tables``: the file has them already when False) and write the
    header: meta, run (status 'running'), topology, queries."""
    if tables:
        for stmt in ddl():
            con.execute(stmt)
    con.executemany(
        "INSERT INTO streamscope_meta VALUES (?, ?)",
        [
            ["format", FORMAT],
            ["schema_version", str(SCHEMA_VERSION)],
            ["probe_core", meta.probe_core],
            ["cpus", str(meta.cpus)],
        ],
    )
    m = meta
    con.execute(
        "INSERT INTO run VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, NULL, ?, 'running', NULL, ?, ?)",
        [m.run_id, m.name, m.app, m.command, list(m.argv), m.host, topology.name,
         m.started_unix_ns, m.frame_ns, m.version, m.t0_host_ns],
    )  # fmt: skip
    _topology_rows(con, topology, queries)


def create_tables(con: duckdb.DuckDBPyConnection, names: Sequence[str]) -> None:
    """Create the tables ``names``, bare: no documentation, no header (a working copy of a
    few tables, such as the one a run held in memory is rolled up in: a run file's ~300
    statements of tables and comments took ~90 ms a roll-up)."""
    for name in names:
        con.execute(_TABLE[name].ddl()[0])


def topology_counts(topology: Topology) -> dict[str, int]:
    """How many rows of each topology table ``topology`` fills (what ``append_topology``
    starts from the next time)."""
    return {
        "resource": len(topology.resources), "stage": len(topology.stages),
        "channel": len(topology.channels), "channel_end": len(topology.ends),
        "probe": len(topology.probes),
        "function": len(topology.functions),
    }  # fmt: skip


def append_topology(
    con: duckdb.DuckDBPyConnection,
    written: dict[str, int],
    topology: Topology,
    queries: Sequence[QueryRecord] | None,
) -> None:
    """The run grew: the rows of what ``topology`` added since ``written`` (counts per table),
    appended; the queries (a few rows, their targets grown) rewritten unless None."""
    if queries is not None:
        con.execute("DELETE FROM query")
    _topology_rows(con, topology, queries if queries is not None else (), written)


def _topology_rows(
    con: duckdb.DuckDBPyConnection,
    topology: Topology,
    queries: Sequence[QueryRecord],
    written: dict[str, int] | None = None,
) -> None:
    start = written or {}
    parts: list[tuple[str, Sequence[Any]]] = [
        ("resource", topology.resources[start.get("resource", 0) :]),
        ("stage", topology.stages[start.get("stage", 0) :]),
        ("channel", topology.channels[start.get("channel", 0) :]),
        ("channel_end", topology.ends[start.get("channel_end", 0) :]),
        ("probe", topology.probes[start.get("probe", 0) :]),
        ("query", queries),
    ]
    for table, items in parts:
        names = [c.name for c in _TABLE[table].columns]
        first_function = start.get("function", 0)
        if table == "query" and len(topology.functions) > first_function:
            con.executemany(
                "INSERT INTO function VALUES (?, ?)",
                [[i + 1, name] for i, name in enumerate(topology.functions) if i >= first_function],
            )
        if table != "query":
            # Scalar columns: one bulk insert, however many rows a growing program adds.
            insert(con, table, [[getattr(it, c) for it in items] for c in names])
            continue
        rows = [[_sql_value(getattr(it, c)) for c in names] for it in items]
        if rows:
            marks = ", ".join("?" * len(names))
            con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)  # noqa: S608


def _sql_value(v: object) -> object:
    return list(v) if isinstance(v, tuple) else v


def set_status(
    con: duckdb.DuckDBPyConnection,
    status: str,
    error: str | None,
    ended_unix_ns: int | None,
    duration_ns: int | None,
) -> None:
    con.execute(
        "UPDATE run SET status = ?, error = ?, ended_unix_ns = ?, duration_ns = ?",
        [status, error, ended_unix_ns, duration_ns],
    )


#: Up to this many rows with a NULL, ``insert`` inserts them one by one.
FEW_ROWS = 64


def insert(con: duckdb.DuckDBPyConnection, table: str, columns: Sequence[Any]) -> None:
    """Bulk insert columns (in table order) through a registered dict of numpy arrays.

    ``None`` in a DOUBLE column becomes NaN, which DuckDB's numpy scan stores as NULL; in
    a nullable integer column, a masked value (NULL too).
    """
    if not columns or len(columns[0]) == 0:
        return
    spec = _TABLE[table].columns
    if len(columns[0]) <= FEW_ROWS and any(
        "NOT NULL" not in c.sql and any(v is None for v in col)
        for c, col in zip(spec, columns, strict=True)
    ):
        # A few rows with a NULL (a topology's): inserted as they are, where a masked array
        # would load numpy's masked arrays (9 ms of a monitor's start) for them.
        marks = ", ".join("?" * len(spec))
        rows = [list(row) for row in zip(*columns, strict=True)]
        con.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)  # noqa: S608
        return
    arrays: dict[str, Any] = {
        c.name: _array(col, c.sql) for c, col in zip(spec, columns, strict=True)
    }
    view = f"_streamscope_new_{table}"
    con.register(view, arrays)
    try:
        con.execute(f"INSERT INTO {table} SELECT * FROM {view}")  # noqa: S608
    finally:
        con.unregister(view)


def _array(col: Any, sql: str) -> Any:
    """A column's values as the numpy array DuckDB scans."""
    dtype = _DTYPES[sql.split(maxsplit=1)[0]]
    if dtype is np.int64 and "NOT NULL" not in sql and any(v is None for v in col):
        missing = np.array([v is None for v in col])
        values = np.array([0 if v is None else v for v in col], dtype=np.int64)
        return np.ma.masked_array(values, mask=missing)
    return np.asarray(col, dtype=dtype)


def _where(query_id: int | None, target: str | None) -> tuple[str, list[Any]]:
    conds: list[str] = []
    params: list[Any] = []
    if query_id is not None:
        conds.append("query_id = ?")
        params.append(query_id)
    if target is not None:
        conds.append("target = ?")
        params.append(target)
    return (f" WHERE {' AND '.join(conds)}" if conds else ""), params


def select(con: duckdb.DuckDBPyConnection, table: str) -> list[tuple[Any, ...]]:
    """Every row of a table, in insertion order."""
    rows: list[tuple[Any, ...]] = con.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()  # noqa: S608
    return rows


def select_columns(
    con: duckdb.DuckDBPyConnection, table: str, query_id: int | None, target: str | None
) -> dict[str, Any]:
    """A results table as numpy columns sorted by ``_rows.SORT_KEYS`` (ties: insertion order)."""
    where, params = _where(query_id, target)
    cols = ", ".join(_SELECT[table])
    order = ", ".join((*_rows.SORT_KEYS[table], "rowid"))
    sql = f"SELECT {cols} FROM {table}{where} ORDER BY {order}"  # noqa: S608
    out: dict[str, Any] = con.execute(sql, params).fetchnumpy()
    return out
