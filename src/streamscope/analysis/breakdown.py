"""Whole-run breakdowns of a recorded run: where each stage spent its time, how each channel filled.

In: a ``Run`` (``streamscope.load(path)`` or ``Run.from_memory``). Out: ``StageBreakdown`` per stage
(``stage_breakdown``) and ``ChannelSummary`` per channel (``channel_summary``), each over the whole
run, time-weighted over frames by the time each frame observed (``covered_ns``). Only what the run
recorded is used: a figure no query measured is ``None``.

The categories of Curreri, Koehler, George, Holland & Garcia (Performance Analysis Framework for
High-Level Language Applications in Reconfigurable Computing, 2010; PPW+RC) are derived from the
measured states: a stage's time splits into computation (busy), communication (waiting on a channel:
blocked_in + blocked_out) and other (idle); a channel's time into blocking (full: its producer
cannot put), idle (empty: its consumer starves) and transferring (neither).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.analysis.levels import full_empty_per_frame
from streamscope.analysis.series import Series, collect, duty_observed, whole_run
from streamscope.core.errors import QueryError
from streamscope.core.topology import ChannelInfo, StageInfo
from streamscope.store.reader import Run

#: The four states a stage tracker reports, in the order the seed categories use them.
STATES = ("idle", "busy", "blocked_in", "blocked_out")


# --- stages ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StageBreakdown:
    """Where one stage spent the run's observed time (fractions summing to 1, or ``None``).

    ``idle``/``busy``/``blocked_in`` (waiting to get)/``blocked_out`` (waiting to put) come from its
    ``state`` queries, time-weighted over frames; all are ``None`` when no state query covered the
    stage. Seed-003 categories: ``computation`` = busy, ``communication`` = blocked_in +
    blocked_out (waiting on channels), ``other`` = idle. ``frames`` is the frame numbers used and
    ``observed_ns`` the time they observed.
    """

    stage: str
    resource: str
    role: str
    idle: float | None
    busy: float | None
    blocked_in: float | None
    blocked_out: float | None
    frames: tuple[int, ...] = ()
    observed_ns: int = 0

    @property
    def computation(self) -> float | None:
        return self.busy

    @property
    def communication(self) -> float | None:
        if self.blocked_in is None or self.blocked_out is None:
            return None
        return self.blocked_in + self.blocked_out

    @property
    def other(self) -> float | None:
        return self.idle

    @property
    def observed(self) -> bool:
        return self.busy is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "resource": self.resource,
            "role": self.role,
            "idle": self.idle,
            "busy": self.busy,
            "blocked_in": self.blocked_in,
            "blocked_out": self.blocked_out,
            "computation": self.computation,
            "communication": self.communication,
            "other": self.other,
            "frames": list(self.frames),
            "observed_ns": self.observed_ns,
        }


def stage_breakdown(run: Run, *, series: Sequence[Series] | None = None) -> list[StageBreakdown]:
    """One ``StageBreakdown`` per stage of ``run.topology``, in topology order.

    ``series``: ``collect(run)`` where the caller has it already (it is not read again).
    """
    duty_series: dict[str, list[Series]] = {}
    found = collect(run) if series is None else series
    for s in found:
        if s.query.metric == "state" and s.duty is not None:
            duty_series.setdefault(s.target, []).append(s)
    firsts = _first_items(run, found)
    return [
        _one_stage(st, duty_series.get(st.name, []), firsts.get(st.name))
        for st in run.topology.stages
    ]


def _first_items(run: Run, series: Sequence[Series]) -> dict[str, int]:
    """When each stage took its first item, as the start of the first frame in which a channel
    into it had items removed at its head (its throughput; virtual ns), where the run
    measured it."""
    taken: dict[str, int] = {}
    for s in series:
        mean = s.scalars.get("mean") if s.query.metric == "throughput" else None
        if mean is not None and len(s.spans) == len(mean):
            some = s.spans[np.isfinite(mean) & (mean > 0), 0]
            if len(some):
                taken[s.target] = min(taken.get(s.target, int(some.min())), int(some.min()))
    topo = run.topology
    out: dict[str, int] = {}
    for c in topo.channels:
        if c.name in taken:
            for st in topo.consumers(c):
                out[st] = min(out.get(st, taken[c.name]), taken[c.name])
    return out


def _one_stage(st: StageInfo, found: Sequence[Series], first_item: int | None) -> StageBreakdown:
    """``st`` over its working life in all its state queries (``working_life``): a
    covered-time-weighted mean of the frames from its first it worked in to its last not
    wholly idle (before its first item a stage waits for the others, after its last it is
    idle: a device still starting its simulators, or a loader process still starting, would
    count against its busy share what no stage did), and from its first item taken where
    that is known (``first_item``: virtual ns; a program's main thread starting two process pools
    is at work before it, then waits on them for their first results, a second and more
    beside busy cores, which counted against the consumer it is from then on)."""
    frac: dict[str, float | None] = dict.fromkeys(STATES)
    frames: set[int] = set()
    acc = dict.fromkeys(STATES, 0.0)
    observed = 0.0
    for s in found:
        assert s.duty is not None
        ok = working_life(s.duty, s.duty_labels, duty_observed(s.duty, s.covered))
        if first_item is not None and len(s.spans) == len(ok):
            after = s.spans[:, 1] > first_item  # frames ending after it: from its frame on
            if (ok & after).any():
                ok &= after
        w = s.covered[ok]
        for j, label in enumerate(s.duty_labels):
            if label in acc:
                acc[label] += float(np.dot(s.duty[ok, j], w))
        observed += float(w.sum())
        frames.update(int(f) for f in s.frames[ok])
    if observed > 0:
        frac = {k: v / observed for k, v in acc.items()}
    return StageBreakdown(
        st.name,
        st.resource,
        st.role,
        frac["idle"],
        frac["busy"],
        frac["blocked_in"],
        frac["blocked_out"],
        tuple(sorted(frames)),
        int(observed),
    )


#: A frame whose idle share is at least this is wholly idle.
WHOLLY_IDLE = 0.999
#: A frame in which a stage was busy or held an item (blocked out) for at least this share of
#: it is one it worked in.
WORKED = 0.01


def working_life(
    duty: NDArray[np.float64], labels: Sequence[str], ok: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """``ok`` (the frames with duty data) from the first frame the stage worked in (busy or
    holding an item for ``WORKED`` of it or more) to the last that is not wholly idle: a
    stage's working life. Before its first item it only waited for the others to start (a
    process spawned on a loaded machine can take frames to); a wait after its last item, for
    more that did not come, stays in, and once done it is idle. A stage that never worked that
    much (a sink whose items take microseconds) starts at its first frame not wholly idle."""
    if "idle" not in labels or not ok.any():
        return ok
    total = np.nansum(duty, axis=1)

    def share(*names: str) -> NDArray[np.float64]:
        cols = [list(labels).index(n) for n in names if n in labels]
        out: NDArray[np.float64] = np.divide(
            duty[:, cols].sum(axis=1), total, out=np.zeros_like(total), where=total > 0
        )
        return out

    awake = np.flatnonzero(ok & (share("idle") < WHOLLY_IDLE))
    if not len(awake):
        return ok
    worked = np.flatnonzero(ok & (share("busy", "blocked_out") >= WORKED))
    first = worked[0] if len(worked) and worked[0] <= awake[-1] else awake[0]
    life = np.zeros_like(ok)
    life[first : awake[-1] + 1] = True
    return ok & life


# --- channels -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ChannelSummary:
    """How one channel filled and flowed over the whole run (``None``: not measured).

    ``mean_occupancy`` (items, time-weighted), ``max_occupancy`` (the largest frame max),
    ``full_fraction`` (time at capacity) and ``empty_fraction`` (time empty) come from its
    occupancy queries; the fractions need an occupancy histogram whose bins single out level 0
    and level ``capacity`` (a bare ``histogram`` does). ``throughput_per_s`` is the time-weighted
    mean of its throughput queries. ``virtual``: a link channel, whose occupancy is a model
    estimate of the whole queue (tail buffer, bus, head buffer): ``full_fraction`` is then
    ``None`` (the whole queue has no single capacity), and ``verdict`` is the model's self-check
    (``consistent``/``rejected``; ``None`` without one). Seed-003 categories: ``blocking`` = full
    (its producer cannot put), ``idle`` = empty (its consumer starves), ``transferring`` = the rest.
    """

    channel: str
    src: str
    dst: str
    capacity: int
    transport: str
    mean_occupancy: float | None
    max_occupancy: float | None
    full_fraction: float | None
    empty_fraction: float | None
    throughput_per_s: float | None
    virtual: bool = False
    verdict: str | None = None
    occupancy_frames: tuple[int, ...] = ()
    #: Every stage that puts into it and every stage that takes from it (``src``, ``dst``
    #: first): more than one where several stages share the queue.
    srcs: tuple[str, ...] = ()
    dsts: tuple[str, ...] = ()

    @property
    def blocking(self) -> float | None:
        return self.full_fraction

    @property
    def idle(self) -> float | None:
        return self.empty_fraction

    @property
    def transferring(self) -> float | None:
        if self.full_fraction is None or self.empty_fraction is None:
            return None
        return max(0.0, 1.0 - self.full_fraction - self.empty_fraction)

    def to_dict(self) -> dict[str, Any]:
        return {
            "channel": self.channel,
            "src": self.src,
            "dst": self.dst,
            "producers": list(self.srcs or (self.src,)),
            "consumers": list(self.dsts or (self.dst,)),
            "capacity": self.capacity,
            "transport": self.transport,
            "mean_occupancy": self.mean_occupancy,
            "max_occupancy": self.max_occupancy,
            "full_fraction": self.full_fraction,
            "empty_fraction": self.empty_fraction,
            "throughput_per_s": self.throughput_per_s,
            "virtual": self.virtual,
            "verdict": self.verdict,
            "transferring": self.transferring,
            "idle": self.idle,
            "blocking": self.blocking,
            "occupancy_frames": list(self.occupancy_frames),
        }


def channel_summary(run: Run, *, series: Sequence[Series] | None = None) -> list[ChannelSummary]:
    """One ``ChannelSummary`` per channel of ``run.topology``, in topology order.

    ``series``: ``collect(run)`` where the caller has it already (it is not read again).
    """
    series = collect(run) if series is None else series
    verdicts = _model_verdicts(run)
    out = []
    for ch in run.topology.channels:
        occ = [s for s in series if s.target == ch.name and s.query.metric == "occupancy"]
        thr = [s for s in series if s.target == ch.name and s.query.metric == "throughput"]
        one = _one_channel(ch, occ, thr, verdicts.get(ch.name))
        topo = run.topology
        out.append(replace(one, srcs=topo.producers(ch), dsts=topo.consumers(ch)))
    return out


def _model_verdicts(run: Run) -> dict[str, str]:
    """Each link channel's queue-model verdict; ``rejected`` in any query wins."""
    vq: dict[str, str] = {}
    try:
        for v in run.virtual_queues():
            if vq.get(v["target"]) != "rejected" and v.get("verdict") is not None:
                vq[v["target"]] = str(v["verdict"])
    except QueryError:  # an older or partial file: no verdicts to report
        return {}
    return vq


def _one_channel(
    ch: ChannelInfo, occ: Sequence[Series], thr: Sequence[Series], verdict: str | None
) -> ChannelSummary:
    full, empty = _full_empty(ch, occ)
    return ChannelSummary(
        ch.name,
        ch.src,
        ch.dst,
        ch.capacity,
        ch.transport,
        _combined(occ, "mean"),
        _combined(occ, "max"),
        full,
        empty,
        _combined(thr, "mean"),
        ch.is_link,
        verdict,
        tuple(sorted({int(x) for s in occ for x in s.frames})),
    )


def _full_empty(ch: ChannelInfo, occ: Sequence[Series]) -> tuple[float | None, float | None]:
    """(full fraction, empty fraction) of ``ch`` over all frames of its occupancy histograms;
    ``None`` where a frame's bins cannot tell, and full always ``None`` for a link channel."""
    tot_w = empty_w = full_w = 0.0
    full_known = empty_known = True
    any_hist = False
    for s in occ:
        total, e, f = full_empty_per_frame(s, None if ch.is_link else ch.capacity)
        have = ~np.isnan(total)
        if not have.any():
            continue
        any_hist = True
        tot_w += float(total[have].sum())
        empty_known &= not np.isnan(e[have]).any()
        full_known &= not np.isnan(f[have]).any()
        empty_w += float(np.nansum(e[have]))
        full_w += float(np.nansum(f[have]))
    if not (any_hist and tot_w > 0):
        return None, None
    empty = empty_w / tot_w if empty_known else None
    full = full_w / tot_w if full_known and not ch.is_link else None
    return full, empty


def _combined(series: Sequence[Series], stat: str) -> float | None:
    """``stat`` over the whole run across several series of one target (their frames pooled)."""
    vals = [s.scalars[stat] for s in series if stat in s.scalars]
    if not vals:
        return None
    cov = [s.covered for s in series if stat in s.scalars]
    return whole_run(np.concatenate(vals), np.concatenate(cov), stat)
