"""One neutral in-memory timeline of a run, which every export format writes out.

In: a loaded ``Run`` (its topology, calibration, frame results and, where kept, raw records).
Out: a ``Timeline`` in virtual ns since the run's start: a process track per resource, a thread
track per stage (per worker of a stage of several), state slices per worker, traced function
calls (nested enter/exit slices, from trace probes' ENTER/EXIT records), counter series
(channel occupancy, every query stat per frame, each device clock's bound half-width), instant
events for the other raw records, and the clock domains with their fits' bound widths.
Everything per event is held as numpy columns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.analysis.hotspots import stack_rows
from streamscope.core.records import STATE_LABELS, Kind
from streamscope.core.topology import HOST, ProbeInfo
from streamscope.export.calls import call_records, call_slices, call_tracks
from streamscope.export.counters import clock_bounds, frame_stats, occupancy
from streamscope.export.tracks import (
    KIND_NAMES,
    ClockDomain,
    Instants,
    ProcessTrack,
    Slices,
    StackSamples,
    ThreadTrack,
    Timeline,
)
from streamscope.store.reader import Run
from streamscope.timebase.domains import Domains

__all__ = ["KIND_NAMES", "Timeline", "build_timeline", "clock_domains"]

I64 = NDArray[np.int64]


def clock_domains(run: Run, *, drift_ppb_per_s: float = 100.0) -> Domains:
    """The run's tick → virtual-ns conversion (``timebase.domains``), fitted to all of its
    calibration bursts, each with the method its ``clock_fit`` rows name (hull by default)."""
    cal = run.columns("SELECT domain, burst, t1_ns, t2_ticks, t3_ns FROM calibration")
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
    processes, threads, worker_tid = _tracks(run)
    pid_of_stage = {t.name: t.pid for t in threads}
    clocks = clock_domains(run)
    rec = _records(run, clocks)
    flight = run.table("flight")
    overwritten = int(sum(flight["overwritten"].tolist())) if len(flight["overwritten"]) else 0
    duration = int(run.duration_ns or (int(rec.ns.max()) if len(rec.ns) else 0))
    probe_tid = _probe_threads(run, {t.name: t.tid for t in threads if t.worker <= 1})
    for probe, tid in worker_tid.items():
        probe_tid[probe] = tid
    slices = _state_slices(topo.probes, rec, probe_tid, duration)
    is_call = call_records(topo.probes, rec.probe_ids, rec.kinds)
    calls, unmatched, still_open = call_slices(
        rec.probe_ids[is_call], rec.kinds[is_call], rec.ns[is_call], rec.values[is_call],
        probe_tid, duration,
    )  # fmt: skip
    _, split = call_tracks(slices, calls)
    counters = occupancy(run, rec.probe_ids, rec.kinds, rec.ns, rec.values, pid_of_stage)
    counters += frame_stats(run, pid_of_stage, {c.name: c.src for c in topo.channels})
    counters += clock_bounds(clocks, processes, duration)
    domains = _domains(run)
    return Timeline(
        name=run.meta.name,
        run_id=run.meta.run_id,
        status=run.status,
        duration_ns=duration,
        started_unix_ns=int(run.meta.started_unix_ns),
        traced=_traced(run, rec.probe_ids) and not overwritten,
        flight_overwritten=overwritten,
        processes=processes,
        threads=threads,
        slices=slices,
        counters=counters,
        instants=_instants(rec, probe_tid, is_call, shown=instants),
        domains=domains,
        calls=calls,
        functions=tuple(topo.functions),
        call_tracks=split,
        calls_unmatched=unmatched,
        calls_open_at_end=still_open,
        uncertainty_ns=_uncertainty(rec.uncertainty_ns, domains),
        clipped=rec.clipped,
        stacks=tuple((st, state, stack, ns) for st, state, stack, _, ns in stack_rows(run)),
        **_stack_samples(run, rec, probe_tid),
    )


def _stack_samples(run: Run, rec: _Records, probe_tid: NDArray[np.int32]) -> dict[str, Any]:
    """The STACK records among ``rec`` on their workers' tracks, and the stacks they name
    (``stack_id``)."""
    mine = rec.kinds == int(Kind.STACK)
    if not mine.any():
        return {}
    _, named = run.sql("SELECT probe, id, stack FROM stack_id ORDER BY probe, id")
    names = [str(text) for _, _, text in named]
    index = {(int(p), int(i)): k for k, (p, i, _) in enumerate(named)}
    v = rec.values[mine]
    worker = v >> 32
    known = (worker >= 0) & (worker < len(probe_tid))
    tid = np.where(known, probe_tid[np.where(known, worker, 0)], 0)
    sid = v & 0xFFFFFF
    stack = np.array([index.get((int(p), int(i)), -1) if i else -1
                      for p, i in zip(rec.probe_ids[mine].tolist(), sid.tolist(), strict=True)],
                     dtype=np.int32)  # fmt: skip
    keep = tid > 0
    order = np.argsort(rec.ns[mine][keep], kind="stable")
    samples = StackSamples(
        tid=tid[keep][order].astype(np.int32), t_ns=rec.ns[mine][keep][order],
        state=((v[keep] >> 24) & 0xF)[order].astype(np.int8), stack=stack[keep][order],
    )  # fmt: skip
    return {"samples": samples, "stack_names": tuple(names)}


@dataclass(frozen=True, slots=True)
class _Records:
    """The run's raw records as columns, in virtual ns (clipped to the run's start), with the
    largest bound half-width of each probe domain's clock map and how many were clipped."""

    probe_ids: NDArray[np.int32]
    kinds: NDArray[np.int8]
    ns: I64
    values: I64
    uncertainty_ns: dict[str, float]
    clipped: int


def _records(run: Run, clocks: Domains) -> _Records:
    """Every raw record of ``run``, each probe's ticks mapped by its domain's clock map."""
    rec = run.columns("SELECT probe_id, kind, ticks, value FROM record")
    probes = run.topology.probes
    probe_ids = rec["probe_id"].astype(np.int32)
    ns = np.zeros(len(probe_ids), dtype=np.int64)
    uncertainty: dict[str, float] = {}
    for pr_domain in sorted({p.domain for p in probes}):
        ids = np.array([p.id for p in probes if p.domain == pr_domain], dtype=np.int32)
        sel = np.isin(probe_ids, ids)
        if not sel.any():
            continue
        t, half = clocks.to_ns_each(pr_domain, rec["ticks"][sel].astype(np.int64))
        ns[sel] = t
        uncertainty[pr_domain] = max(uncertainty.get(pr_domain, 0.0), float(half.max()))
    return _Records(
        probe_ids=probe_ids,
        kinds=rec["kind"].astype(np.int8),
        ns=np.maximum(ns, 0),
        values=rec["value"].astype(np.int64),
        uncertainty_ns=uncertainty,
        clipped=int((ns < 0).sum()),
    )


def _tracks(run: Run) -> tuple[list[ProcessTrack], list[ThreadTrack], dict[int, int]]:
    """A process track per resource (pid from 1), and a thread track per stage on its
    resource's, or per worker of a stage that has several (each with a state probe of its
    own: a pool's); a resource missing from the table gets a track of its own. Also: each
    worker's state probe's track."""
    processes = [
        ProcessTrack(i + 1, r.name, r.kind, r.clock_domain)
        for i, r in enumerate(run.topology.resources)
    ]
    pid_of = {p.name: p.pid for p in processes}
    states: dict[str, list[int]] = {}
    for p in run.topology.probes:
        if p.kind == "state":
            states.setdefault(p.target, []).append(p.id)
    threads: list[ThreadTrack] = []
    worker_tid: dict[int, int] = {}
    for s in run.topology.stages:
        if s.resource not in pid_of:
            pid = len(processes) + 1
            processes.append(ProcessTrack(pid, s.resource, "unknown", HOST))
            pid_of[s.resource] = pid
        probes = sorted(states.get(s.name, ()))
        for k, probe in enumerate(probes if len(probes) > 1 else [None]):
            tid = len(threads) + 1
            threads.append(ThreadTrack(tid, pid_of[s.resource], s.name, s.role,
                                       worker=k + 1 if probe is not None else 0))  # fmt: skip
            if probe is not None:
                worker_tid[probe] = tid
    return processes, threads, worker_tid


def _probe_threads(run: Run, tid_of: dict[str, int]) -> NDArray[np.int32]:
    """Per probe id, the thread of the stage that shows its records (0: none): a stage's own,
    or a channel end's stage (the tail's for its source, the head's for its destination)."""
    topo = run.topology
    chan = {c.name: c for c in topo.channels}
    probe_tid = np.zeros(max([p.id for p in topo.probes], default=0) + 1, dtype=np.int32)
    for p in topo.probes:
        if p.target in tid_of:
            probe_tid[p.id] = tid_of[p.target]
        elif p.target in chan:
            end = chan[p.target].src if p.kind in ("tail", "send") else chan[p.target].dst
            probe_tid[p.id] = tid_of.get(end, 0)
    return probe_tid


def _instants(
    rec: _Records, probe_tid: NDArray[np.int32], is_call: NDArray[np.bool_], *, shown: bool
) -> Instants:
    """The records of probes a stage shows, in time order, as instant events (none unless
    ``shown``; trace probes' ENTER/EXIT records, ``is_call``, are shown as call slices)."""
    n = len(rec.probe_ids)
    keep = np.ones(n, dtype=bool) if shown else np.zeros(n, dtype=bool)
    # A record of a probe the topology does not name (a damaged file) has no thread to show on.
    known = (rec.probe_ids >= 0) & (rec.probe_ids < len(probe_tid))
    keep &= known & (probe_tid[np.where(known, rec.probe_ids, 0)] > 0)
    keep &= ~is_call
    order = np.argsort(rec.ns[keep], kind="stable")
    return Instants(
        tid=probe_tid[rec.probe_ids[keep]][order],
        t_ns=rec.ns[keep][order],
        kind=rec.kinds[keep][order],
        value=rec.values[keep][order],
        probe=rec.probe_ids[keep][order],
    )


def _uncertainty(measured: dict[str, float], domains: list[ClockDomain]) -> dict[str, float]:
    """Each domain's largest bound half-width: as measured, else 0 for the host's and inf for
    a domain none of whose records were mapped."""
    out = dict(measured)
    for d in domains:
        out.setdefault(d.name, 0.0 if d.name == HOST else float("inf"))
    return out


def _traced(run: Run, probe_ids: NDArray[np.int32]) -> bool:
    """Whether every host probe's records were kept (a ``--trace`` run; trace probes' records
    are kept in every run, so they tell nothing)."""
    host = [p.id for p in run.topology.probes if p.domain == HOST and p.kind != "trace"]
    return bool(host) and bool(np.isin(host, probe_ids).all())


def _state_slices(
    probes: Sequence[ProbeInfo], rec: _Records, probe_tid: NDArray[np.int32], duration_ns: int
) -> Slices:
    """One slice per STATE record: from it to the stage's next one (the last ends at the run's
    end, or where it starts if that is later)."""
    state_probes = np.array([p.id for p in probes if p.kind == "state"], dtype=np.int32)
    sel = (rec.kinds == int(Kind.STATE)) & np.isin(rec.probe_ids, state_probes)
    pid, t, v = rec.probe_ids[sel], rec.ns[sel], rec.values[sel]
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


def _domains(run: Run) -> list[ClockDomain]:
    """Every clock domain of the run's resources, with its ``clock_fit`` rows."""
    fits = run.columns(
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
