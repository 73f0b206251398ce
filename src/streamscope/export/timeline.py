"""One neutral in-memory timeline of a run, which every export format writes out.

In: a loaded ``Run`` (its topology, calibration, frame results and, where kept, raw records).
Out: a ``Timeline`` in virtual ns since the run's start: a process track per resource, a thread
track per stage, state slices per stage, traced function calls (nested enter/exit slices, from
trace probes' ENTER/EXIT records), counter series (channel occupancy, every query stat per frame,
each device clock's bound half-width), instant events for the other raw records, and the clock
domains with their fits' bound widths. Everything per event is held as numpy columns.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import STATE_LABELS, Kind
from streamscope.export.calls import (
    Calls,
    _call_slots,
    _calls,
)
from streamscope.store.reader import Run
from streamscope.timebase.domains import HOST, Domains

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
#: Names of raw record kinds, as instant-event names.
KIND_NAMES = {int(k): k.name.lower() for k in Kind}
_ENTER, _EXIT = int(Kind.ENTER), int(Kind.EXIT)
#: Points sampled across the run for each device clock's bound half-width counter.
BOUND_SAMPLES = 200


@dataclass(frozen=True, slots=True)
class ProcessTrack:
    """A resource: ``pid`` from 1, its clock domain."""

    pid: int
    name: str
    kind: str
    clock_domain: str


@dataclass(frozen=True, slots=True)
class ThreadTrack:
    """A stage on a resource: ``tid`` unique across the run, from 1."""

    tid: int
    pid: int
    name: str
    role: str


@dataclass(frozen=True, slots=True)
class CounterSeries:
    """Samples of one counter: the value holds from ``t_ns[i]`` until ``t_ns[i + 1]``.

    ``group``: ``occupancy`` (a channel's level), ``stat`` (a query stat per frame) or
    ``clock`` (a device clock's bound half-width, ns); ``pid`` is the resource it belongs to.
    """

    name: str
    pid: int
    unit: str
    group: str
    t_ns: I64
    values: F64
    exact: bool = False  # occupancy from raw records: every level change


@dataclass(frozen=True, slots=True)
class Slices:
    """State slices as columns: stage thread ``tid``, [start_ns, end_ns), ``state`` code."""

    tid: NDArray[np.int32]
    start_ns: I64
    end_ns: I64
    state: NDArray[np.int8]

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class Instants:
    """Raw records as instant events: thread ``tid``, time, record ``kind``, ``value``, probe."""

    tid: NDArray[np.int32]
    t_ns: I64
    kind: NDArray[np.int8]
    value: I64
    probe: NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class ClockDomain:
    """A clock domain: its resources, nominal tick, and each calibration burst's fit."""

    name: str
    resources: tuple[str, ...]
    tick_period_ns: float
    method: str
    bound_width_ns: tuple[float, ...]  # per burst, at its centre (clock_fit.bound_width_ns)
    feasible: tuple[bool, ...]

    def to_dict(self) -> dict[str, Any]:
        w = [x for x in self.bound_width_ns if np.isfinite(x)]
        return {
            "name": self.name,
            "resources": list(self.resources),
            "tick_period_ns": self.tick_period_ns,
            "method": self.method,
            "bursts": len(self.bound_width_ns),
            "feasible_bursts": sum(self.feasible),
            "bound_width_ns": list(self.bound_width_ns),
            "bound_width_ns_min": min(w) if w else None,
            "bound_width_ns_max": max(w) if w else None,
            "reference": self.name == HOST,
        }


@dataclass(slots=True)
class Timeline:
    """A whole run on one virtual-time axis (ns since the run's start)."""

    name: str
    run_id: str
    status: str
    duration_ns: int
    started_unix_ns: int
    traced: bool
    #: Older raw records the flight recorder let go (its records cover the run's last stretch).
    flight_overwritten: int
    processes: list[ProcessTrack]
    threads: list[ThreadTrack]
    slices: Slices
    counters: list[CounterSeries]
    instants: Instants
    domains: list[ClockDomain]
    calls: Calls = field(default_factory=Calls.empty)
    #: Traced functions' names (``module:qualname``); a call's ``function`` id is 1-based.
    functions: tuple[str, ...] = ()
    #: Stages (thread ``tid``) whose calls cross their state slices' bounds: their calls go on
    #: a track of their own ("STAGE calls"), since one track's slices must nest.
    call_tracks: tuple[int, ...] = ()
    #: ENTER/EXIT records that closed nothing (skipped), and calls still open at the end.
    calls_unmatched: int = 0
    calls_open_at_end: int = 0
    #: Largest bound half-width (ns) of the clock maps used for each domain's events.
    uncertainty_ns: dict[str, float] = field(default_factory=dict)
    clipped: int = 0  # events timed before the run's start, moved to 0

    def metadata(self) -> dict[str, Any]:
        """The run and its clock domains as a JSON-able dict (every format stores it)."""
        return {
            "streamscope_run": self.name,
            "run_id": self.run_id,
            "status": self.status,
            "duration_ns": self.duration_ns,
            "started_unix_ns": self.started_unix_ns,
            "time": "virtual ns since the run's start",
            "traced": self.traced,
            "clock_domains": [d.to_dict() for d in self.domains],
            "uncertainty_ns": dict(self.uncertainty_ns),
            "events_clipped_to_start": self.clipped,
            "calls": len(self.calls),
            "calls_unmatched_records": self.calls_unmatched,
            "calls_open_at_end": self.calls_open_at_end,
        }

    def function_name(self, fid: int) -> str:
        """The name of traced function ``fid`` (1-based), or ``function FID`` if unknown."""
        return self.functions[fid - 1] if 0 < fid <= len(self.functions) else f"function {fid}"

    def function_names(self) -> list[str]:
        """``function_name(i)`` for every id the calls use, indexed by id (0 unused)."""
        top = max(len(self.functions), int(self.calls.function.max()) if len(self.calls) else 0)
        return [self.function_name(i) for i in range(top + 1)]

    @property
    def n_counter_samples(self) -> int:
        return sum(len(c.t_ns) for c in self.counters)


def _numpy(run: Run, sql: str) -> dict[str, NDArray[Any]]:
    """Columns of a query as numpy arrays straight from DuckDB (no Python tuples per row)."""
    con = run._source.connection()  # the run's own read-only connection
    out: dict[str, NDArray[Any]] = con.execute(sql).fetchnumpy()
    return {k: np.asarray(v) for k, v in out.items()}


def clock_domains(run: Run, *, drift_ppb_per_s: float = 100.0) -> Domains:
    """The run's tick → virtual-ns conversion (``timebase.domains``), fitted to all of its
    calibration bursts, each with the method its ``clock_fit`` rows name (hull by default)."""
    cal = _numpy(run, "SELECT domain, burst, t1_ns, t2_ticks, t3_ns FROM calibration")
    _, rows = run.sql("SELECT DISTINCT domain, method FROM clock_fit")
    return Domains.from_calibration(
        run.topology,
        int(run.meta.t0_host_ns),
        cal,
        {str(d): str(m) for d, m in rows},
        drift_ppb_per_s=drift_ppb_per_s,
    )


def build_timeline(run: Run, *, instants: bool = True) -> Timeline:
    """The run at ``run`` as a ``Timeline`` (see the module docstring); ``instants=False``
    leaves raw records out of the instant events (slices and counters still use them)."""
    topo = run.topology
    t0 = int(run.meta.t0_host_ns)
    processes = [
        ProcessTrack(i + 1, r.name, r.kind, r.clock_domain) for i, r in enumerate(topo.resources)
    ]
    pid_of = {p.name: p.pid for p in processes}
    threads: list[ThreadTrack] = []
    for s in topo.stages:
        if s.resource not in pid_of:  # a resource missing from the table: give it a track
            pid = len(processes) + 1
            processes.append(ProcessTrack(pid, s.resource, "unknown", HOST))
            pid_of[s.resource] = pid
        threads.append(ThreadTrack(len(threads) + 1, pid_of[s.resource], s.name, s.role))
    tid_of = {t.name: t.tid for t in threads}
    pid_of_stage = {t.name: t.pid for t in threads}
    chan = {c.name: c for c in topo.channels}

    clocks = clock_domains(run)
    rec = _numpy(run, "SELECT probe_id, kind, ticks, value FROM record")
    flight = run.table("flight")
    overwritten = int(sum(flight["overwritten"].tolist())) if len(flight["overwritten"]) else 0
    n = len(rec["probe_id"])
    probe_ids = rec["probe_id"].astype(np.int32)
    ns = np.zeros(n, dtype=np.int64)
    uncertainty: dict[str, float] = {}
    for pr_domain in sorted({p.domain for p in topo.probes}):
        ids = np.array([p.id for p in topo.probes if p.domain == pr_domain], dtype=np.int32)
        sel = np.isin(probe_ids, ids)
        if not sel.any():
            continue
        t, half = clocks.to_ns_each(pr_domain, rec["ticks"][sel].astype(np.int64))
        ns[sel] = t
        uncertainty[pr_domain] = max(uncertainty.get(pr_domain, 0.0), float(half.max()))
    clipped = int((ns < 0).sum())
    ns = np.maximum(ns, 0)
    kinds = rec["kind"].astype(np.int8)
    values = rec["value"].astype(np.int64)

    duration = int(run.duration_ns or (int(ns.max()) if n else 0))
    # the stage whose thread shows each probe's records
    probe_tid = np.zeros(max([p.id for p in topo.probes], default=0) + 1, dtype=np.int32)
    for p in topo.probes:
        if p.target in tid_of:
            probe_tid[p.id] = tid_of[p.target]
        elif p.target in chan:
            end = chan[p.target].src if p.kind in ("tail", "send") else chan[p.target].dst
            probe_tid[p.id] = tid_of.get(end, 0)

    slices = _state_slices(topo.probes, probe_ids, kinds, ns, values, probe_tid, duration)
    trace_ids = np.array([p.id for p in topo.probes if p.kind == "trace"], dtype=np.int32)
    is_call = np.isin(probe_ids, trace_ids) & ((kinds == _ENTER) | (kinds == _EXIT))
    calls, unmatched, still_open = _calls(
        probe_ids[is_call], kinds[is_call], ns[is_call], values[is_call], probe_tid, duration
    )
    _, split = _call_slots(slices, calls)
    counters = _occupancy(run, probe_ids, kinds, ns, values, pid_of_stage)
    counters += _frame_stats(run, pid_of_stage, {c.name: c.src for c in topo.channels})
    counters += _clock_bounds(clocks, processes, t0, duration)

    keep = np.ones(n, dtype=bool) if instants else np.zeros(n, dtype=bool)
    keep &= probe_tid[np.clip(probe_ids, 0, len(probe_tid) - 1)] > 0
    keep &= ~is_call  # shown as call slices
    order = np.argsort(ns[keep], kind="stable")
    inst = Instants(
        tid=probe_tid[probe_ids[keep]][order],
        t_ns=ns[keep][order],
        kind=kinds[keep][order],
        value=values[keep][order],
        probe=probe_ids[keep][order],
    )
    domains = _domains(run)
    for d in domains:
        uncertainty.setdefault(d.name, 0.0 if d.name == HOST else float("inf"))
    return Timeline(
        name=run.meta.name,
        run_id=run.meta.run_id,
        status=run.status,
        duration_ns=duration,
        started_unix_ns=int(run.meta.started_unix_ns),
        traced=_traced(run, probe_ids) and not overwritten,
        flight_overwritten=overwritten,
        processes=processes,
        threads=threads,
        slices=slices,
        counters=counters,
        instants=inst,
        domains=domains,
        calls=calls,
        functions=tuple(topo.functions),
        call_tracks=split,
        calls_unmatched=unmatched,
        calls_open_at_end=still_open,
        uncertainty_ns=uncertainty,
        clipped=clipped,
    )


def _traced(run: Run, probe_ids: NDArray[np.int32]) -> bool:
    """Whether every host probe's records were kept (a ``--trace`` run; trace probes' records
    are kept in every run, so they tell nothing)."""
    host = [p.id for p in run.topology.probes if p.domain == HOST and p.kind != "trace"]
    return bool(host) and bool(np.isin(host, probe_ids).all())


def _state_slices(
    probes: Any,
    probe_ids: NDArray[np.int32],
    kinds: NDArray[np.int8],
    ns: I64,
    values: I64,
    probe_tid: NDArray[np.int32],
    duration_ns: int,
) -> Slices:
    """One slice per STATE record: from it to the stage's next one (the last ends at the run's
    end, or where it starts if that is later)."""
    state_probes = np.array([p.id for p in probes if p.kind == "state"], dtype=np.int32)
    sel = (kinds == int(Kind.STATE)) & np.isin(probe_ids, state_probes)
    pid, t, v = probe_ids[sel], ns[sel], values[sel]
    order = np.lexsort((t, pid))
    pid, t, v = pid[order], t[order], v[order]
    end = np.empty_like(t)
    if len(t):
        same = pid[1:] == pid[:-1]
        end[:-1] = np.where(same, t[1:], np.maximum(t[:-1], duration_ns))
        end[-1] = max(int(t[-1]), duration_ns)
    return Slices(
        tid=probe_tid[pid].astype(np.int32),
        start_ns=t,
        end_ns=end,
        state=np.clip(v, 0, len(STATE_LABELS) - 1).astype(np.int8),
    )


def _occupancy(
    run: Run,
    probe_ids: NDArray[np.int32],
    kinds: NDArray[np.int8],
    ns: I64,
    values: I64,
    pid_of_stage: dict[str, int],
) -> list[CounterSeries]:
    """Each channel's level after every insertion and removal, where both ends' records were
    kept (inserted-so far minus removed-so-far, from the sequence numbers, so lost records
    cost no accuracy); else its per-frame mean occupancy from the results, if queried."""
    out: list[CounterSeries] = []
    topo = run.topology
    means = _stat_series(run, "occupancy", "mean")
    for c in topo.channels:
        tail = [p.id for p in topo.probes if p.target == c.name and p.kind == "tail"]
        head = [p.id for p in topo.probes if p.target == c.name and p.kind == "head"]
        put = np.isin(probe_ids, tail) & (kinds == int(Kind.PUT))
        get = np.isin(probe_ids, head) & (kinds == int(Kind.GET))
        pid = pid_of_stage.get(c.src, 1)
        name = f"occupancy {c.name}"
        if put.any() and get.any():
            sel = put | get
            t, v, is_put = ns[sel], values[sel], put[sel]
            # at equal times removals first: a level never shows above what the items allow
            order = np.lexsort((is_put, t))
            t, v, is_put = t[order], v[order], is_put[order]
            ins = np.maximum.accumulate(np.where(is_put, v, 0))
            rem = np.maximum.accumulate(np.where(is_put, 0, v))
            level = (ins - rem).astype(np.float64)
            # one sample per distinct time: the level after the last event at that time
            last = np.r_[t[1:] != t[:-1], True]
            t0 = np.array([0], dtype=np.int64)
            ts = np.concatenate([t0, t[last]]) if t[0] > 0 else t[last]
            vs = np.concatenate([[0.0], level[last]]) if t[0] > 0 else level[last]
            out.append(CounterSeries(name, pid, "items", "occupancy", ts, vs, exact=True))
        elif c.name in means:
            ts, vs = means[c.name]
            out.append(CounterSeries(name, pid, "items", "occupancy", ts, vs))
    return out


def _stat_series(run: Run, metric: str, stat: str) -> dict[str, tuple[I64, F64]]:
    """Per target, the first query of ``metric`` that has ``stat``: frame starts and values."""
    q = [x for x in run.queries if x.metric == metric]
    out: dict[str, tuple[I64, F64]] = {}
    for query in q:
        sql = (
            "SELECT s.target, f.t_start_ns, s.value FROM stat s JOIN frame f "  # noqa: S608
            "USING (query_id, target, frame) WHERE s.value IS NOT NULL AND s.query_id = "
            f"{int(query.id)} AND s.stat = {stat!r} ORDER BY s.target, s.frame"
        )  # ids and stat names come from code, not from input
        cols = _numpy(run, sql)
        targets = cols["target"].astype(str)
        for target in dict.fromkeys(targets.tolist()):
            if target not in out:
                m = targets == target
                out[target] = (
                    cols["t_start_ns"][m].astype(np.int64),
                    cols["value"][m].astype(np.float64),
                )
    return out


def _frame_stats(
    run: Run, pid_of_stage: dict[str, int], src_of_channel: dict[str, str]
) -> list[CounterSeries]:
    """Every query stat of every target as a counter sampled at its frames' starts (and held
    until the last frame's end)."""
    cols = _numpy(
        run,
        "SELECT s.query_id, s.target, s.stat, f.t_start_ns, f.t_end_ns, s.value FROM stat s "
        "JOIN frame f USING (query_id, target, frame) WHERE s.value IS NOT NULL "
        "AND isfinite(s.value) ORDER BY s.query_id, s.target, s.stat, s.frame",
    )
    n = len(cols["query_id"])
    if not n:
        return []
    qid = cols["query_id"].astype(np.int64)
    target = cols["target"].astype(str)
    stat = cols["stat"].astype(str)
    key_change = np.r_[True, (qid[1:] != qid[:-1]) | (target[1:] != target[:-1])]
    key_change |= np.r_[True, stat[1:] != stat[:-1]]
    starts = np.flatnonzero(key_change)
    stops = np.r_[starts[1:], n]
    metric = {q.id: (q.metric, q.unit) for q in run.queries}
    out = []
    for a, b in zip(starts.tolist(), stops.tolist(), strict=True):
        m, unit = metric.get(int(qid[a]), ("query", ""))
        tgt = str(target[a])
        st = str(stat[a])
        if st.startswith("duty."):
            unit = "fraction"
        elif st in ("uncertainty_ns",):
            unit = "ns"
        elif st in ("violations", "rejected"):
            unit = "count"
        stage = tgt if tgt in pid_of_stage else src_of_channel.get(tgt, "")
        t = np.r_[cols["t_start_ns"][a:b], cols["t_end_ns"][b - 1]].astype(np.int64)
        v = np.r_[cols["value"][a:b], cols["value"][b - 1]].astype(np.float64)
        name = f"q{int(qid[a])} {m}({tgt}) {st}"
        out.append(CounterSeries(name, pid_of_stage.get(stage, 1), unit, "stat", t, v))
    return out


def _clock_bounds(
    clocks: Domains,
    processes: list[ProcessTrack],
    t0_host_ns: int,
    duration_ns: int,
) -> list[CounterSeries]:
    """Per device clock, the half-width of its hard bounds (ns) across the run: the timing
    uncertainty of every event of that domain."""
    out = []
    for domain, model in clocks.models.items():
        pid = next((p.pid for p in processes if p.clock_domain == domain), 1)
        fits = model.fits
        if not fits:
            continue
        # ticks spanning the run: invert the map at its ends, sample evenly
        lo_t = min(f.x0_ticks for f in fits)
        hi_t = max(f.x0_ticks for f in fits)
        ends = model.to_ns(np.array([lo_t, hi_t], dtype=np.int64)) - float(t0_host_ns)
        span = float(ends[1] - ends[0])
        slope = (hi_t - lo_t) / span if span > 0 else 1.0 / max(model.tick_period_ns, 1e-9)
        t_virtual = np.linspace(0.0, float(max(duration_ns, 1)), BOUND_SAMPLES)
        ticks = np.rint(lo_t + (t_virtual - float(ends[0])) * slope).astype(np.int64)
        ns, half = clocks.to_ns_each(domain, ticks)
        ok = np.isfinite(half) & (ns >= 0)
        order = np.argsort(ns[ok], kind="stable")
        out.append(
            CounterSeries(
                f"clock {domain} bound ±ns", pid, "ns", "clock", ns[ok][order], half[ok][order]
            )
        )
    return out


def _domains(run: Run) -> list[ClockDomain]:
    """Every clock domain of the run's resources, with its ``clock_fit`` rows."""
    fits = _numpy(
        run,
        "SELECT domain, method, bound_width_ns, feasible FROM clock_fit ORDER BY domain, burst",
    )
    names = fits["domain"].astype(str) if len(fits["domain"]) else np.zeros(0, dtype=str)
    out = []
    by_domain: dict[str, list[str]] = {}
    tick: dict[str, float] = {}
    for r in run.topology.resources:
        by_domain.setdefault(r.clock_domain, []).append(r.name)
        tick.setdefault(r.clock_domain, r.tick_period_ns)
    for d, resources in by_domain.items():
        m = names == d
        method = str(fits["method"][m][0]) if m.any() else ("exact" if d == HOST else "none")
        out.append(
            ClockDomain(
                name=d,
                resources=tuple(resources),
                tick_period_ns=float(tick[d]),
                method=method,
                bound_width_ns=tuple(float(x) for x in fits["bound_width_ns"][m].tolist()),
                feasible=tuple(bool(x) for x in fits["feasible"][m].tolist()),
            )
        )
    return out
