"""One recorded run, read back: its description, its frame results, and SQL over its tables.

In: a run's metadata and topology and where its tables are (a file's connection or an
``InMemoryStore``). Out: ``Run``: results as point objects, the derived views (virtual queues,
overhead, monitor cost, profiles) and the ``show --json`` document.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.closing import Closing
from streamscope.core.errors import QueryError, RunFileError
from streamscope.core.records import OWN_FRAME
from streamscope.core.topology import ProbeInfo, Topology
from streamscope.store import _rows
from streamscope.store._json import run_json
from streamscope.store._sources import DuckDBSource, MemorySource, RunSource
from streamscope.store.duck import duckdb
from streamscope.store.retention import ROLLED_UP_SQL, rolled_up_text
from streamscope.store.runstore import InMemoryStore, QueryRecord, RunMeta

#: The parts of a virtual queue's self-check that decide a frame, in the order they are tried
#: (``vq_frame.decided_by``), and ``unbounded``: a frame left unchecked (no verdict) as the
#: device's clock bounds were open over it.
DECIDED = ("chance", "clock", "tolerance", "discrepancy", "dependence", "unbounded")
#: A run file of at most this many frames is read whole at its first ``results``, and every
#: later one answered from that: three queries in all, not three a query or target (``show``
#: and a run's summary read every target's frames, 1-4 ms a query).
WHOLE_READ_FRAMES = 20_000


class Run(Closing):
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
        source: RunSource,
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
        #: Every target's frames, where the run is small enough to read whole (None: not read;
        #: empty where it is not small, or not a file).
        self._whole: dict[tuple[int, str], list[FrameResult]] | None = None

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
            source=MemorySource(store),
        )

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
            if self._read_whole(src):
                assert self._whole is not None
                if query_id is not None and target is not None:
                    return list(self._whole.get((query_id, target), ()))
                return [r for (q, t), rs in self._whole.items()
                        if query_id in (None, q) and target in (None, t) for r in rs]  # fmt: skip
            return self._rebuild(src, query_id, target)
        except RunFileError as e:
            raise RunFileError(f"{self.path or 'the run'} is damaged: {e}") from None

    def _read_whole(self, src: RunSource) -> bool:
        """Whether every target's frames are read (``_whole``): the first call reads them
        where the run is a small file's."""
        if self._whole is None:
            self._whole = {}
            if isinstance(src, DuckDBSource):
                row = src.connection().execute("SELECT count(*) FROM frame").fetchone()
                if row is not None and row[0] <= WHOLE_READ_FRAMES:
                    for r in self._rebuild(src, None, None):
                        self._whole.setdefault((r.query_id, r.target), []).append(r)
                    self._whole[(-1, "")] = []  # read (a run of no frame too)
        return bool(self._whole)

    def _rebuild(
        self, src: RunSource, query_id: int | None, target: str | None
    ) -> list[FrameResult]:
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

    def columns(self, query: str) -> dict[str, NDArray[Any]]:
        """As ``sql``, but the result's columns as numpy arrays straight from DuckDB (no Python
        tuple per row: for the large tables, ``record`` above all)."""
        con = self._source.connection()
        try:
            out: dict[str, NDArray[Any]] = con.execute(query).fetchnumpy()
        except duckdb.Error as e:
            raise QueryError(str(e), text=query, source=str(self.path or "sql")) from None
        return {k: np.asarray(v) for k, v in out.items()}

    def virtual_queues(self) -> list[dict[str, Any]]:
        """One dict per virtual queue (link channel with an occupancy query): the run's
        verdict and distances (``virtual_queue``), with its per-frame rows (``vq_frame``) and
        ``arrivals_used``: how many frames each arrivals model simulated (``profile``: the
        insertions the device counted per sub-window; ``renewal``: independent gaps), and
        ``decided_by``: how many frames each part of the self-check decided (chance, clock,
        tolerance, discrepancy, dependence; see ``vq_frame.decided_by``)."""
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
            decided: dict[str, int] = {}
            for f in d["frames_detail"]:
                if f.get("decided_by"):
                    decided[f["decided_by"]] = decided.get(f["decided_by"], 0) + 1
            d["decided_by"] = {k: decided[k] for k in DECIDED if k in decided}
            out.append(d)
        return out

    @property
    def worked_ns(self) -> int | None:
        """The time the run's work went on: a program's from its start to its end, a
        pipeline's stages' from the run's start to their end (the ``machine`` table's wall
        time on the main host); the run's duration where that is not recorded. What monitoring
        cost is a share of this: the monitor's own start and end, before and after it, cost
        the program nothing (they are the monitor process's, said on their own)."""
        _, rows = self.sql("SELECT max(wall_ns) FROM machine WHERE host = 'main'")
        wall = rows[0][0] if rows else None
        return int(wall) if wall else self.duration_ns

    def overhead(self) -> list[dict[str, Any]]:
        """The monitoring's own cost per stage: its probes, their events (kept or refused),
        events per second over the run, and the estimated time spent in them
        (``est_probe_ns``); ``own_code_ns``, the time its sampled stacks found in
        streamscope's own code (which counts what the probes' estimate does not: the wrappers
        of a program's queues and threads); ``cost_ns``, the larger of the two (the estimate
        alone for a stage of streamscope's runner, whose loop is ``runner_ns``), and as a
        fraction of the time the run's work went on (``fraction``, of ``worked_ns``); for
        stages run by streamscope's runner, the stage thread's CPU time (``cpu_ns``), the part
        of it in the stage's own code (``user_ns``, estimated from samples, at most
        ``cpu_ns``) and what is left for the runner's loop and the channels (``runner_ns``, probes taken out;
        ``runner_fraction`` of ``cpu_ns``); and the stack samplers' threads
        (``STACK_SAMPLING``: their samples and CPU time); a program's start watched and its
        threads and queues made workers and channels (``SETUP``: the CPU time its processes
        spent on that, measured).
        Sorted by ``cost_ns``, largest first."""
        _, rows = self.sql("SELECT probe_id, events, est_probe_ns FROM overhead")
        by_id = {p.id: p for p in self.topology.probes}
        per: dict[str, dict[str, Any]] = {}

        def row_of(stage: str) -> dict[str, Any]:
            return per.setdefault(
                stage, {"stage": stage, "probes": 0, "events": 0, "est_probe_ns": 0.0}
            )

        for pid, events, est in rows:
            p = by_id.get(pid)
            if p is not None and p.kind == "stacks":
                continue  # no stage's thread writes them: the samplers' own thread, below
            row = row_of(probe_stage(self.topology, p) if p is not None else "?")
            row["probes"] += 1
            row["events"] += int(events)
            row["est_probe_ns"] += float(est)
        _, sampled = self.sql("SELECT count(*), sum(samples), sum(cpu_ns) FROM stack_sampler")
        if sampled and sampled[0][0]:
            row = row_of(STACK_SAMPLING)
            row["probes"], row["events"] = int(sampled[0][0]), int(sampled[0][1])
            row["est_probe_ns"] = float(sampled[0][2])
        _, setup = self.sql("SELECT sum(setup_ns) FROM machine")
        if setup and setup[0][0]:
            row_of(SETUP)["est_probe_ns"] = float(setup[0][0])  # measured, not estimated
        for stage, ns in self._own_code_ns().items():
            row_of(stage)["own_code_ns"] = ns
        _, runner = self.sql("SELECT stage, items, samples, user_ns, cpu_ns FROM runner")
        for stage, items, samples, user_ns, cpu_ns in runner:
            row = row_of(stage)
            # Extrapolated from the items timed (one in 64 of quick ones: a few hundred items
            # give a handful, and one of them costing a millisecond more, as a garbage
            # collection in it would, took the estimate to twice the thread's CPU once beside
            # a busy core): at most what the thread used, which holds it.
            user = min(user_ns * items / samples, cpu_ns) if samples else None
            row["cpu_ns"] = cpu_ns
            row["user_ns"] = user
            row["items"] = items
            if user is not None:
                row["runner_ns"] = max(cpu_ns - user - row["est_probe_ns"], 0.0)
                row["runner_fraction"] = row["runner_ns"] / cpu_ns if cpu_ns else None
        seconds = (self.duration_ns or 0) / 1e9
        for row in per.values():  # the runner's loop is its own row (``runner_ns``)
            own = row.setdefault("own_code_ns", 0.0) if "cpu_ns" not in row else 0.0
            row.setdefault("own_code_ns", 0.0)
            row["cost_ns"] = max(row["est_probe_ns"], own)
        out = sorted(per.values(), key=lambda r: -r["cost_ns"])
        worked = self.worked_ns
        for row in out:
            row["events_per_s"] = row["events"] / seconds if seconds else None
            row["fraction"] = row["cost_ns"] / worked if worked else None
            for key in ("cpu_ns", "user_ns", "items", "runner_ns", "runner_fraction"):
                row.setdefault(key, None)
        return out

    def _own_code_ns(self) -> dict[str, float]:
        """Per stage, the time its sampled stacks found in streamscope's own code (the leaf
        frame ``OWN_FRAME``: its probes, and the wrappers of a program's queues and threads)
        while it was on a core or waiting for one: what monitoring cost its threads, measured,
        where the probes' time is estimated per event."""
        _, rows = self.sql(
            "SELECT stage, stack, sum(ns) FROM stacks WHERE state IN ('running', 'waiting') "
            "GROUP BY stage, stack"
        )
        out: dict[str, float] = {}
        for stage, stack, ns in rows:
            if ns and (stack == OWN_FRAME or str(stack).endswith(";" + OWN_FRAME)):
                out[str(stage)] = out.get(str(stage), 0.0) + float(ns)
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

    def notes(self) -> list[tuple[str, str]]:
        """What the run says of itself besides its figures: ``(about, text)`` in the order
        written (``about``: ``unwatched``, ``outlived``, ``empty``), then which of its
        stretches were rolled up into coarser frames (``rolled_up``: a run made with
        ``--keep``)."""
        _, rows = self.sql("SELECT about, text FROM note ORDER BY rowid")
        out = [(str(a), str(t)) for a, t in rows]
        stretches = self.rolled_up()
        if stretches:
            out.append(("rolled_up", rolled_up_text(stretches)))
        return out

    def rolled_up(self) -> list[tuple[int, int, int, int]]:
        """The stretches whose frames were rolled up into coarser ones (``--keep``):
        ``(t_start_ns, t_end_ns, frame_ns, query frame_ns)``, earliest first; none for a run
        whose frames are all as long as their queries'."""
        _, rows = self.sql(ROLLED_UP_SQL)
        return [(int(a), int(b), int(w), int(f)) for a, b, w, f in rows]

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


#: The ``overhead`` row of the stack samplers: their threads' CPU time (``stack_sampler``).
STACK_SAMPLING = "(stack sampling)"
#: The ``overhead`` row of a program's start watched and its threads and queues made workers
#: and channels: the CPU time its processes spent on that (``machine.setup_ns``).
SETUP = "(start, threads and queues)"


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


__all__ = ["SETUP", "STACK_SAMPLING", "Run", "probe_stage"]
