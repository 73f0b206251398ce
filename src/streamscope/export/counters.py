"""A run's counter series for the timeline: channel levels, query stats per frame, clock bounds.

In: a loaded ``Run`` (its frame results and, where kept, raw records already in virtual ns) and
its clock maps. Out: ``CounterSeries`` (each value holds until the next sample), and query
results as numpy columns straight from the run file.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import Kind
from streamscope.export.tracks import F64, I64, CounterSeries, ProcessTrack
from streamscope.store.reader import Run
from streamscope.timebase.domains import Domains

#: Points sampled across the run for each device clock's bound half-width counter.
BOUND_SAMPLES = 200


def occupancy(
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
        cols = run.columns(sql)
        targets = cols["target"].astype(str)
        for target in dict.fromkeys(targets.tolist()):
            if target not in out:
                m = targets == target
                out[target] = (
                    cols["t_start_ns"][m].astype(np.int64),
                    cols["value"][m].astype(np.float64),
                )
    return out


def frame_stats(
    run: Run, pid_of_stage: dict[str, int], src_of_channel: dict[str, str]
) -> list[CounterSeries]:
    """Every query stat of every target as a counter sampled at its frames' starts (and held
    until the last frame's end)."""
    cols = run.columns(
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


def clock_bounds(
    clocks: Domains, processes: list[ProcessTrack], duration_ns: int
) -> list[CounterSeries]:
    """Per device clock, the half-width of its hard bounds (ns) across the run: the timing
    uncertainty of every event of that domain."""
    out = []
    for domain, clock in clocks.fitted().items():
        if not clock.model.fits:
            continue
        pid = next((p.pid for p in processes if p.clock_domain == domain), 1)
        ns, half = clock.bound_series(duration_ns, BOUND_SAMPLES)
        out.append(CounterSeries(f"clock {domain} bound ±ns", pid, "ns", "clock", ns, half))
    return out
