"""Reads a run back: ``load(path)`` opens a run file read-only and returns a ``Run``.

In: a run file's path. Out: its ``Run`` (``store/run.py``), once the file is found to be a
streamscope run of this schema; a file whose writer is gone is repaired first.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from streamscope.core.errors import RunFileError
from streamscope.core.topology import (
    ChannelEnd,
    ChannelInfo,
    ProbeInfo,
    ResourceInfo,
    StageInfo,
    Topology,
)
from streamscope.store import _sqlio
from streamscope.store._sources import CONFINED, DuckDBSource
from streamscope.store.duck import duckdb
from streamscope.store.lock import WRITER_GONE, repair, wait_for_repair, writer_alive
from streamscope.store.run import Run, probe_stage
from streamscope.store.runstore import QueryRecord, RunMeta
from streamscope.store.schema import FORMAT, SCHEMA_VERSION, STATUSES, TABLE_NAMES, TABLES


def load(path: str | Path) -> Run:
    """Open the run file at ``path`` read-only (several readers may share it).

    Raises ``RunFileError`` naming the path when it is missing, not a DuckDB file, not a
    streamscope run, written by a newer schema, or locked by a writer that is still running.
    A file left ``running`` by a writer that is gone is repaired first (``store/lock.py``):
    its status becomes ``failed`` with the cause; every frame it committed stays.
    """
    p = Path(path)
    run = _open(p)
    while run.status == "running" and writer_alive(p):
        # Its writer runs, or another process (a command like this one, a run sweeping what
        # killed runs left) is repairing it: that is waited for, and the file read again.
        run.close()  # (a reader open stops the repair)
        waited = wait_for_repair(p)
        run = _open(p)
        if not waited:
            return run
    if run.status != "running":
        return run
    # Its writer is gone (killed, crashed, a full disk): the file is finalised as failed, with
    # every frame it committed, once and for all; where it cannot be written, only as read.
    run.close()
    try:
        repair(p)
    except RunFileError as e:
        run = _open(p)
        if run.status == "running":
            run.status, run.error = "failed", f"{WRITER_GONE} (not repaired: {e})"
        return run
    return _open(p)


def _open(p: Path) -> Run:
    if not p.is_file():
        what = "is a directory, not a run file" if p.is_dir() else "does not exist"
        raise RunFileError(f"{p} {what}")
    while True:
        try:
            con = duckdb.connect(str(p), read_only=True, config=dict(CONFINED))
            break
        except duckdb.Error as e:
            if "lock" in str(e).lower() and wait_for_repair(p):
                continue  # another process was repairing it: it is finished now
            raise RunFileError(f"{p} cannot be opened: {_open_problem(str(e))}") from None
    try:
        return _read(p, con)
    except duckdb.Error as e:
        con.close()
        raise RunFileError(f"{p} is damaged or not a streamscope run file: {e}") from None
    except BaseException:
        con.close()
        raise


def _open_problem(msg: str) -> str:
    if "not a valid DuckDB database" in msg:
        return "it is not a streamscope run file (not a DuckDB database)"
    if "different configuration" in msg:
        return "this process still has it open for writing (close the store first)"
    if "lock" in msg.lower():
        return f"a process still writing it holds its lock (is the run still going?) [{msg}]"
    return msg


def _columns_problem(con: duckdb.DuckDBPyConnection) -> str | None:
    """What is wrong with the file's columns against the schema (a column renamed, retyped,
    missing, or allowed NULL where the schema forbids it), or None."""
    rows = con.execute(
        "SELECT table_name, column_name, data_type, is_nullable FROM duckdb_columns() "
        "WHERE schema_name = 'main'"
    ).fetchall()
    have: dict[str, dict[str, tuple[str, bool]]] = {}
    for table, column, dtype, nullable in rows:
        have.setdefault(table, {})[column] = (str(dtype), bool(nullable))
    for t in TABLES:
        cols = have.get(t.name, {})
        for c in t.columns:
            want = c.sql.split()[0]
            if c.name not in cols:
                return f"table {t.name} lacks the column {c.name} ({want})"
            dtype, nullable = cols[c.name]
            if dtype != want:
                return f"column {t.name}.{c.name} is {dtype}, expected {want}"
            if nullable and "NOT NULL" in c.sql:
                return f"column {t.name}.{c.name} allows NULL; the schema says NOT NULL"
    return None


def read_written(path: Path, con: duckdb.DuckDBPyConnection) -> Run:
    """The run its writer's connection ``con`` holds (the file at ``path``), read as ``load``
    reads a file but for the checks of its schema (the writer made its tables); closing the
    run leaves the connection to its writer."""
    return _read(path, con, owned=False)


def _read(p: Path, con: duckdb.DuckDBPyConnection, *, owned: bool = True) -> Run:
    """The run in ``con`` (the file at ``p``), once it is found to be a streamscope run file of
    this schema, whole and consistent (``owned``: a file opened here; the schema of one this
    process wrote is its own, not checked again: a tenth of a short run's end)."""
    if owned:
        meta = _identity(p, con)
    else:
        meta = dict(con.execute("SELECT key, value FROM streamscope_meta").fetchall())
    run = _run_row(p, con)
    topology = _topology(p, con, run["pipeline"])
    queries = tuple(
        QueryRecord(i, text, metric, unit, fns, tuple(targets), tuple(stats))
        for i, text, metric, unit, fns, targets, stats in _sqlio.select(con, "query")
    )
    return Run(
        meta=_run_meta(run, meta),
        status=run["status"],
        error=run["error"],
        ended_unix_ns=run["ended_unix_ns"],
        duration_ns=run["duration_ns"],
        topology=topology,
        queries=queries,
        source=DuckDBSource(con, owned=owned),
        path=p,
    )


def _run_meta(run: dict[str, Any], meta: dict[str, str]) -> RunMeta:
    """What was known when the run started: its ``run`` row and the file's probe core."""
    return RunMeta(
        run["run_id"],
        run["name"],
        run["app"],
        run["command"],
        tuple(run["argv"]),
        run["host"],
        run["started_unix_ns"],
        run["frame_ns"],
        run["streamscope_version"],
        run["t0_host_ns"],
        str(meta.get("probe_core", "")),
        int(meta.get("cpus", "0") or 0),
    )


def _refusal(p: Path, why: str) -> RunFileError:
    return RunFileError(f"{p} is not a streamscope run file: {why}")


def _identity(p: Path, con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """The file's ``streamscope_meta``, once it says it is a run of this schema, with every
    table and column the schema has."""
    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
        ).fetchall()
    }
    if "streamscope_meta" not in tables:
        raise _refusal(p, "it has no streamscope_meta table")
    meta = dict(con.execute("SELECT key, value FROM streamscope_meta").fetchall())
    if meta.get("format") != FORMAT:
        raise _refusal(
            p, f"streamscope_meta has format {meta.get('format')!r}, expected {FORMAT!r}"
        )
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        version = meta.get("schema_version")
        raise RunFileError(
            f"{p} has schema_version {version!r}; this streamscope reads {SCHEMA_VERSION}"
        )
    missing = [t for t in TABLE_NAMES if t not in tables]
    if missing:
        raise _refusal(p, f"it lacks the tables {', '.join(missing)}")
    problem = _columns_problem(con)
    if problem:
        raise _refusal(p, problem)
    return meta


def _run_row(p: Path, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The ``run`` table's one row, by column, once its status and frame length are valid."""
    cur = con.execute("SELECT * FROM run")
    runs = cur.fetchall()
    if len(runs) != 1:
        raise _refusal(p, f"its run table has {len(runs)} rows, not 1")
    run = dict(zip([d[0] for d in cur.description], runs[0], strict=True))
    if run["status"] not in STATUSES:
        raise _refusal(p, f"its run status is {run['status']!r}; valid: {', '.join(STATUSES)}")
    if not run["frame_ns"] or run["frame_ns"] <= 0:
        raise _refusal(p, f"its frame length is {run['frame_ns']!r} ns; it must be positive")
    return run


def _topology(p: Path, con: duckdb.DuckDBPyConnection, pipeline: str) -> Topology:
    """The run's resources, stages, channels, probes (their ids distinct) and functions."""

    def fetch(table: str) -> list[tuple[Any, ...]]:
        return _sqlio.select(con, table)

    topology = Topology(
        pipeline,
        tuple(ResourceInfo(*r) for r in fetch("resource")),
        tuple(StageInfo(*r) for r in fetch("stage")),
        tuple(ChannelInfo(*r) for r in fetch("channel")),
        tuple(ProbeInfo(*r) for r in fetch("probe")),
        functions=tuple(name for _, name in sorted(fetch("function"))),
        ends=tuple(ChannelEnd(*r) for r in fetch("channel_end")),
    )
    ids = [probe.id for probe in topology.probes]
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise _refusal(
            p, f"its probe ids are not distinct non-negative numbers: {sorted(ids)[:10]}"
        )
    return topology


__all__ = ["CONFINED", "Run", "load", "probe_stage"]
