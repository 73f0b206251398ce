"""Reads a run back: ``load(path)`` opens a run file read-only and returns a ``Run``.

A ``Run`` rebuilds frame results as point objects, runs SQL, and renders ``show --json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol

import duckdb
import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.errors import QueryError, RunFileError
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.store import _rows, _sqlio
from streamscope.store._json import run_json
from streamscope.store.lock import WRITER_GONE, repair, writer_alive
from streamscope.store.schema import FORMAT, SCHEMA_VERSION, STATUSES, TABLE_NAMES, TABLES
from streamscope.store.writer import InMemoryStore, QueryRecord, RunMeta


class _Source(Protocol):
    """Where a ``Run`` reads its results tables from."""

    def columns(self, table: str, query_id: int | None, target: str | None) -> _rows.Columns:
        """``frame``, ``stat`` or ``histogram`` rows, filtered, sorted by ``_rows.SORT_KEYS``."""
        ...

    def drops(self) -> list[tuple[int, int, int, int]]: ...

    def connection(self) -> duckdb.DuckDBPyConnection: ...

    def close(self) -> None: ...


class Run:
    """One recorded run. ``status`` is as stored: ``running`` = still going, or the writer died.

    ``path`` is ``None`` for a run read from an ``InMemoryStore``. A run loaded from a file holds
    a read-only connection to it until ``close()`` (or the end of a ``with`` block).
    """

    def __init__(
        self,
        *,
        meta: RunMeta,
        status: str,
        error: str | None,
        ended_unix_ns: int | None,
        duration_ns: int | None,
        topology: Topology,
        queries: tuple[QueryRecord, ...],
        source: _Source,
        path: Path | None = None,
    ) -> None:
        self.meta = meta
        self.status = status
        self.error = error
        self.ended_unix_ns = ended_unix_ns
        self.duration_ns = duration_ns
        self.topology = topology
        self.queries = queries
        self.path = path
        self._source = source

    @classmethod
    def from_memory(cls, store: InMemoryStore) -> Run:
        """The run an ``InMemoryStore`` holds, read back exactly as from a file."""
        if store.meta is None:
            raise ValueError("the in-memory store has not begun a run")
        return cls(
            meta=store.meta,
            status=store.status,
            error=store.error,
            ended_unix_ns=store.ended_unix_ns,
            duration_ns=store.duration_ns,
            topology=store.topology,
            queries=store.queries,
            source=_MemorySource(store),
        )

    def __enter__(self) -> Run:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._source.close()

    def query(self, query_id: int) -> QueryRecord:
        """The query with this id (``KeyError`` if none)."""
        for q in self.queries:
            if q.id == query_id:
                return q
        raise KeyError(query_id)

    def results(self, query_id: int | None = None, target: str | None = None) -> list[FrameResult]:
        """Frame results, ordered by query id, target, frame; ``None`` filters nothing."""
        src = self._source
        try:
            return self._rebuild(src, query_id, target)
        except RunFileError as e:
            raise RunFileError(f"{self.path or 'the run'} is damaged: {e}") from None

    def _rebuild(self, src: _Source, query_id: int | None, target: str | None) -> list[FrameResult]:
        return _rows.rebuild(
            src.columns("frame", query_id, target),
            src.columns("stat", query_id, target),
            src.columns("histogram", query_id, target),
            {q.id: q.stats for q in self.queries},
        )

    def drops(self) -> list[DropCount]:
        """Drop counts ordered by probe id and frame."""
        return [DropCount(*r) for r in sorted(self._source.drops(), key=lambda r: (r[0], r[1]))]

    def sql(self, query: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run SQL on the run's tables (read-only; nothing outside the run can be reached:
        ``CONFINED``); returns column names and rows."""
        if not query.strip():
            raise QueryError("empty query: give a SQL statement", text=query, source="sql")
        con = self._source.connection()
        try:
            cur = con.execute(query)
            columns = [d[0] for d in cur.description or ()]
            return columns, cur.fetchall() if columns else []
        except duckdb.Error as e:
            raise QueryError(str(e), text=query, source=str(self.path or "sql")) from None

    def virtual_queues(self) -> list[dict[str, Any]]:
        """One dict per virtual queue (link channel with an occupancy query): the run's
        verdict and distances (``virtual_queue``), with its per-frame rows (``vq_frame``) and
        ``arrivals_used``: how many frames each arrivals model simulated (``profile``: the
        insertions the device counted per sub-window; ``renewal``: independent gaps)."""
        cols, rows = self.sql("SELECT * FROM virtual_queue ORDER BY query_id, target")
        fcols, frows = self.sql("SELECT * FROM vq_frame ORDER BY query_id, target, frame")
        frames: dict[tuple[int, str], list[dict[str, Any]]] = {}
        for r in frows:
            d = dict(zip(fcols, r, strict=True))
            key = (d.pop("query_id"), d.pop("target"))
            frames.setdefault(key, []).append(d)
        out = []
        for r in rows:
            d = dict(zip(cols, r, strict=True))
            d["frames_detail"] = frames.get((d["query_id"], d["target"]), [])
            used: dict[str, int] = {}
            for f in d["frames_detail"]:
                if f.get("arrivals"):
                    used[f["arrivals"]] = used.get(f["arrivals"], 0) + 1
            d["arrivals_used"] = dict(sorted(used.items()))
            out.append(d)
        return out

    def overhead(self) -> list[dict[str, Any]]:
        """The monitoring's own cost per stage: its probes, their events (kept or refused),
        events per second over the run, and the estimated time spent in them (ns, and as a
        fraction of the run's duration); for stages run by streamscope's runner, the stage
        thread's CPU time (``cpu_ns``), the part of it in the stage's own code (``user_ns``,
        estimated from samples) and what is left for the runner's loop and the channels
        (``runner_ns``, probes taken out; ``runner_fraction`` of ``cpu_ns``). Sorted by
        estimated probe time, largest first."""
        _, rows = self.sql("SELECT probe_id, events, est_probe_ns FROM overhead")
        by_id = {p.id: p for p in self.topology.probes}
        per: dict[str, dict[str, Any]] = {}

        def row_of(stage: str) -> dict[str, Any]:
            return per.setdefault(
                stage, {"stage": stage, "probes": 0, "events": 0, "est_probe_ns": 0.0}
            )

        for pid, events, est in rows:
            p = by_id.get(pid)
            row = row_of(probe_stage(self.topology, p) if p is not None else "?")
            row["probes"] += 1
            row["events"] += int(events)
            row["est_probe_ns"] += float(est)
        _, runner = self.sql("SELECT stage, items, samples, user_ns, cpu_ns FROM runner")
        for stage, items, samples, user_ns, cpu_ns in runner:
            row = row_of(stage)
            user = user_ns * items / samples if samples else None
            row["cpu_ns"] = cpu_ns
            row["user_ns"] = user
            row["items"] = items
            if user is not None:
                row["runner_ns"] = max(cpu_ns - user - row["est_probe_ns"], 0.0)
                row["runner_fraction"] = row["runner_ns"] / cpu_ns if cpu_ns else None
        seconds = (self.duration_ns or 0) / 1e9
        out = sorted(per.values(), key=lambda r: -r["est_probe_ns"])
        for row in out:
            row["events_per_s"] = row["events"] / seconds if seconds else None
            row["fraction"] = row["est_probe_ns"] / self.duration_ns if self.duration_ns else None
            for key in ("cpu_ns", "user_ns", "items", "runner_ns", "runner_fraction"):
                row.setdefault(key, None)
        return out

    def monitor_cost(self) -> dict[str, Any]:
        """The monitor process's own figures over the run: its CPU time (``cpu_ns``, and per
        second of run, ``cores``), records drained, and its lag (the most, and the median over
        frames, by which the reduced timeline trailed real time)."""
        _, rows = self.sql("SELECT lag_ns, records, cpu_ns FROM monitor ORDER BY frame")
        lags = sorted(int(r[0]) for r in rows)
        cpu = sum(int(r[2]) for r in rows)
        dur = self.duration_ns or 0
        return {
            "cpu_ns": cpu,
            "cores": cpu / dur if dur else None,
            "records": sum(int(r[1]) for r in rows),
            "lag_max_ns": lags[-1] if lags else None,
            "lag_median_ns": lags[len(lags) // 2] if lags else None,
        }

    def profiles(self) -> list[dict[str, Any]]:
        """Traced functions per stage (``Pipeline.trace``): ``stage``, ``function`` (name),
        ``calls``, ``total_ns`` (callees included), ``self_ns``, ``max_ns``; by stage, then
        self time, largest first."""
        cols, rows = self.sql(
            "SELECT p.stage, coalesce(f.name, '#' || p.function_id) AS function, p.calls, "
            "p.total_ns, p.self_ns, p.max_ns FROM profile p LEFT JOIN function f "
            "ON f.id = p.function_id ORDER BY p.stage, p.self_ns DESC"
        )
        return [dict(zip(cols, r, strict=True)) for r in rows]

    def trace_exclusions(self) -> dict[str, str]:
        """Functions left out of tracing, and why."""
        _, rows = self.sql("SELECT name, reason FROM trace_exclusion ORDER BY name")
        return {str(n): str(r) for n, r in rows}

    def table(self, name: str) -> dict[str, NDArray[Any]]:
        """A whole table as numpy columns (``calibration``, ``clock_fit``, ``record``, ...)."""
        columns, rows = self.sql(f"SELECT * FROM {name}")  # noqa: S608 - names come from code
        if not rows:
            return {c: np.zeros(0) for c in columns}
        return {c: np.asarray(v) for c, v in zip(columns, zip(*rows, strict=True), strict=True)}

    def to_json(self) -> dict[str, Any]:
        """The ``streamscope show --json`` document (see JSON.md); ``json.dumps``-able."""
        return run_json(self)


def probe_stage(topology: Topology, probe: ProbeInfo) -> str:
    """The stage whose thread runs ``probe``: a channel end's producer or consumer, the stage
    itself, or the stage a declared probe (``STAGE.NAME``) belongs to."""
    if probe.kind in ("tail", "send", "head", "deliver"):
        for c in topology.channels:
            if c.name == probe.target:
                return c.src if probe.kind in ("tail", "send") else c.dst
    if probe.kind in ("sampler", "counter", "timer"):
        return probe.target.rpartition(".")[0]
    return probe.target


class _DuckDBSource:
    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self._con = con

    def columns(self, table: str, query_id: int | None, target: str | None) -> _rows.Columns:
        return _sqlio.select_columns(self._con, table, query_id, target)

    def drops(self) -> list[tuple[int, int, int, int]]:
        return _sqlio.select(self._con, "drops")

    def connection(self) -> duckdb.DuckDBPyConnection:
        return self._con

    def close(self) -> None:
        self._con.close()


_COLUMNS = {
    "frame": _rows.FRAME_COLUMNS,
    "stat": _rows.STAT_COLUMNS,
    "histogram": _rows.HIST_COLUMNS,
}


class _MemorySource:
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


def load(path: str | Path) -> Run:
    """Open the run file at ``path`` read-only (several readers may share it).

    Raises ``RunFileError`` naming the path when it is missing, not a DuckDB file, not a
    streamscope run, written by a newer schema, or locked by a writer that is still running.
    A file left ``running`` by a writer that is gone is repaired first (``store/lock.py``):
    its status becomes ``failed`` with the cause; every frame it committed stays.
    """
    p = Path(path)
    run = _open(p)
    if run.status != "running" or writer_alive(p):
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
    try:
        con = duckdb.connect(str(p), read_only=True, config=dict(CONFINED))
    except duckdb.Error as e:
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


def _read(p: Path, con: duckdb.DuckDBPyConnection) -> Run:
    def refuse(why: str) -> RunFileError:
        return RunFileError(f"{p} is not a streamscope run file: {why}")

    tables = {
        r[0]
        for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main'"
        ).fetchall()
    }
    if "streamscope_meta" not in tables:
        raise refuse("it has no streamscope_meta table")
    meta = dict(con.execute("SELECT key, value FROM streamscope_meta").fetchall())
    if meta.get("format") != FORMAT:
        raise refuse(f"streamscope_meta has format {meta.get('format')!r}, expected {FORMAT!r}")
    if meta.get("schema_version") != str(SCHEMA_VERSION):
        version = meta.get("schema_version")
        raise RunFileError(
            f"{p} has schema_version {version!r}; this streamscope reads {SCHEMA_VERSION}"
        )
    missing = [t for t in TABLE_NAMES if t not in tables]
    if missing:
        raise refuse(f"it lacks the tables {', '.join(missing)}")
    problem = _columns_problem(con)
    if problem:
        raise refuse(problem)
    cur = con.execute("SELECT * FROM run")
    runs = cur.fetchall()
    if len(runs) != 1:
        raise refuse(f"its run table has {len(runs)} rows, not 1")
    run = dict(zip([d[0] for d in cur.description], runs[0], strict=True))
    if run["status"] not in STATUSES:
        raise refuse(f"its run status is {run['status']!r}; valid: {', '.join(STATUSES)}")
    if not run["frame_ns"] or run["frame_ns"] <= 0:
        raise refuse(f"its frame length is {run['frame_ns']!r} ns; it must be positive")

    def fetch(table: str) -> list[tuple[Any, ...]]:
        return _sqlio.select(con, table)

    topology = Topology(
        run["pipeline"],
        tuple(ResourceInfo(*r) for r in fetch("resource")),
        tuple(StageInfo(*r) for r in fetch("stage")),
        tuple(ChannelInfo(*r) for r in fetch("channel")),
        tuple(ProbeInfo(*r) for r in fetch("probe")),
        functions=tuple(name for _, name in sorted(fetch("function"))),
    )
    ids = [p.id for p in topology.probes]
    if any(i < 0 for i in ids) or len(set(ids)) != len(ids):
        raise refuse(f"its probe ids are not distinct non-negative numbers: {sorted(ids)[:10]}")
    queries = tuple(
        QueryRecord(i, text, metric, unit, fns, tuple(targets), tuple(stats))
        for i, text, metric, unit, fns, targets, stats in fetch("query")
    )
    return Run(
        meta=RunMeta(
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
        ),
        status=run["status"],
        error=run["error"],
        ended_unix_ns=run["ended_unix_ns"],
        duration_ns=run["duration_ns"],
        topology=topology,
        queries=queries,
        source=_DuckDBSource(con),
        path=p,
    )
