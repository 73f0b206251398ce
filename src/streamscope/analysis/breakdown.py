"""Whole-run breakdowns of a recorded run: where each stage spent its time, how each channel filled.

In: a ``Run`` (``streamscope.load(path)`` or ``Run.from_memory``). Out: ``StageBreakdown`` per stage
(``stage_breakdown``) and ``ChannelSummary`` per channel (``channel_summary``), each over the whole
run, time-weighted over frames by the time each frame observed (``covered_ns``). Only what the run
recorded is used: a figure no query measured is ``None``.

The seed-003 categories (Curreri et al., PPW+RC) are derived from the measured states: a stage's
time splits into computation (busy), communication (waiting on a channel: blocked_in + blocked_out)
and other (idle); a channel's time into blocking (full: its producer cannot put), idle (empty: its
consumer starves) and transferring (neither).

The private ``_Series``/``collect`` helpers are shared with ``findings`` and ``compare``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import DutyPoint, HistogramPoint, QuantilesPoint, ScalarPoint
from streamscope.core.errors import QueryError
from streamscope.core.topology import ChannelInfo
from streamscope.store._rows import quantile_stat
from streamscope.store.reader import Run
from streamscope.store.writer import QueryRecord

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: The four states a stage tracker reports, in the order the seed categories use them.
STATES = ("idle", "busy", "blocked_in", "blocked_out")
#: Whole-run reduction of a scalar stat over frames; any other stat: time-weighted mean.
_SUMMED = frozenset({"count", "sum", "violations", "rejected"})


@dataclass(slots=True)
class _Series:
    """Every frame of one query for one target, as arrays (``NaN`` where a frame had no data).

    ``scalars`` holds scalar and quantile stats by name; ``duty`` is ``(frames, labels)`` fractions;
    ``hists`` the frames' histograms (``None`` where a frame had none).
    """

    query: QueryRecord
    target: str
    frames: I64
    covered: F64
    scalars: dict[str, F64] = field(default_factory=dict)
    duty_labels: tuple[str, ...] = ()
    duty: F64 | None = None
    hists: list[HistogramPoint | None] = field(default_factory=list)


def collect(run: Run) -> list[_Series]:
    """All results of ``run`` grouped per (query, target), in query then target order."""
    by_key: dict[tuple[int, str], list[Any]] = {}
    for r in run.results():
        by_key.setdefault((r.query_id, r.target), []).append(r)
    queries = {q.id: q for q in run.queries}
    out: list[_Series] = []
    for (qid, target), results in by_key.items():
        q = queries.get(qid)
        if q is None:
            continue
        n = len(results)
        s = _Series(
            q,
            target,
            np.fromiter((r.frame for r in results), np.int64, n),
            np.fromiter((r.covered_ns for r in results), np.float64, n),
        )
        duty_rows: list[tuple[float, ...]] = []
        for i, r in enumerate(results):
            hist: HistogramPoint | None = None
            duty_row: tuple[float, ...] | None = None
            for p in r.points:
                if isinstance(p, ScalarPoint):
                    _put(s.scalars, p.stat, i, n, p.value)
                elif isinstance(p, QuantilesPoint):
                    for qv, v in zip(p.qs, p.values, strict=True):
                        _put(s.scalars, quantile_stat(qv), i, n, v)
                elif isinstance(p, DutyPoint):
                    s.duty_labels = s.duty_labels or p.labels
                    if p.labels == s.duty_labels:
                        duty_row = p.fractions
                elif isinstance(p, HistogramPoint) and hist is None:
                    hist = p
            s.hists.append(hist)
            if s.duty_labels:
                duty_rows.append(duty_row or (math.nan,) * len(s.duty_labels))
        if s.duty_labels:
            # Frames before the first duty point have no row yet: pad them at the front.
            pad = [(math.nan,) * len(s.duty_labels)] * (n - len(duty_rows))
            s.duty = np.array(pad + duty_rows, dtype=np.float64).reshape(n, len(s.duty_labels))
        out.append(s)
    return out


def _put(table: dict[str, F64], stat: str, i: int, n: int, value: float | None) -> None:
    arr = table.get(stat)
    if arr is None:
        arr = table[stat] = np.full(n, np.nan)
    arr[i] = math.nan if value is None else value


def whole_run(values: F64, covered: F64, stat: str) -> float | None:
    """One stat over the whole run from its per-frame ``values`` (``NaN``: no data).

    ``max``/``min``: the extreme frame; ``count``, ``sum``, ``violations``: the total; ``first``:
    the earliest frame's, ``last``: the latest's; anything else (``mean``, quantiles, ...): the mean
    over frames weighted by ``covered`` (a quantile's is the weighted mean of the frames'
    quantiles, not the run's quantile). ``None`` when no frame has data.
    """
    ok = ~np.isnan(values)
    if not ok.any():
        return None
    v, w = values[ok], covered[ok]
    if stat == "max":
        return float(v.max())
    if stat == "min":
        return float(v.min())
    if stat in _SUMMED:
        return float(v.sum())
    if stat == "first":
        return float(v[0])
    if stat == "last":
        return float(v[-1])
    total = float(w.sum())
    if total <= 0:
        return float(v.mean())
    return float(np.dot(v, w) / total)


def _observed(duty: F64, covered: F64) -> NDArray[np.bool_]:
    """Frames with duty data: some of the frame observed (a frame where the stage's states
    were all unknown, a worker not started yet or gone, has fractions that sum to 0)."""
    ok: NDArray[np.bool_] = (
        ~np.isnan(duty).any(axis=1) & (covered > 0) & (np.nansum(duty, axis=1) > 0)
    )
    return ok


def whole_run_duty(s: _Series) -> dict[str, float] | None:
    """The duty fractions of ``s`` over the whole run, weighted by ``covered_ns``; ``None``: none."""
    if s.duty is None:
        return None
    ok = _observed(s.duty, s.covered)
    if not ok.any():
        return None
    w = s.covered[ok]
    fr = (s.duty[ok] * w[:, None]).sum(axis=0) / w.sum()
    return {label: float(f) for label, f in zip(s.duty_labels, fr, strict=True)}


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


def stage_breakdown(run: Run) -> list[StageBreakdown]:
    """One ``StageBreakdown`` per stage of ``run.topology``, in topology order."""
    return _stage_breakdown(run, collect(run))


def _stage_breakdown(run: Run, series: Sequence[_Series]) -> list[StageBreakdown]:
    duty_series: dict[str, list[_Series]] = {}
    for s in series:
        if s.query.metric == "state" and s.duty is not None:
            duty_series.setdefault(s.target, []).append(s)
    out = []
    for st in run.topology.stages:
        found = duty_series.get(st.name, [])
        frac: dict[str, float | None] = dict.fromkeys(STATES)
        frames: set[int] = set()
        observed = 0.0
        if found:
            # All frames of all state queries on the stage: a covered-time-weighted mean.
            acc = dict.fromkeys(STATES, 0.0)
            for s in found:
                assert s.duty is not None
                ok = _observed(s.duty, s.covered)
                w = s.covered[ok]
                for j, label in enumerate(s.duty_labels):
                    if label in acc:
                        acc[label] += float(np.dot(s.duty[ok, j], w))
                observed += float(w.sum())
                frames.update(int(f) for f in s.frames[ok])
            if observed > 0:
                frac = {k: v / observed for k, v in acc.items()}
        out.append(
            StageBreakdown(
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
        )
    return out


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


def channel_summary(run: Run) -> list[ChannelSummary]:
    """One ``ChannelSummary`` per channel of ``run.topology``, in topology order."""
    return _channel_summary(run, collect(run))


def level_fractions(hist: HistogramPoint, capacity: int | None) -> tuple[float, float | None]:
    """(weight at level 0, weight at level ``capacity``) of an occupancy histogram, as weights.

    Occupancy levels are integers, so a bin (or the under/over weight) counts for a level when the
    level is the only integer it can hold. ``NaN`` when the bins cannot tell; the second is
    ``None`` when ``capacity`` is ``None``.
    """
    edges = np.asarray(hist.edges, dtype=np.float64)
    weights = np.nan_to_num(np.asarray(hist.weights, dtype=np.float64))
    return _level_weight(edges, weights, hist.under, hist.over, 0), (
        None
        if capacity is None
        else _level_weight(edges, weights, hist.under, hist.over, capacity, top=True)
    )


def _level_weight(
    edges: F64, weights: F64, under: float, over: float, level: int, *, top: bool = False
) -> float:
    """Weight at integer ``level`` (``top``: also everything above it), ``NaN`` if ambiguous."""
    if edges.size < 2:
        return math.nan
    under, over = (0.0 if not math.isfinite(x) else x for x in (under, over))
    if top:
        # Nothing lies above the capacity: every bin from the one holding `level` up counts,
        # provided that bin holds no level below it.
        if level >= edges[-1]:
            return over if edges[-1] > level - 1 else math.nan
        i = int(np.searchsorted(edges, level, side="right")) - 1
        if i < 0:
            return math.nan
        if edges[i] <= level - 1:
            return math.nan
        return float(weights[i:].sum() + over)
    if level < edges[0]:
        return under if edges[0] <= level + 1 else math.nan
    i = int(np.searchsorted(edges, level, side="right")) - 1
    if i >= weights.size:
        return math.nan
    if edges[i + 1] > level + 1:
        return math.nan
    return float(weights[i])


def full_empty_per_frame(s: _Series, capacity: int | None) -> tuple[F64, F64, F64]:
    """Per frame of an occupancy series: (total weight, empty weight, full weight), NaN: unknown."""
    n = len(s.hists)
    total, empty, full = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for i, h in enumerate(s.hists):
        if h is None:
            continue
        tot = float(np.nansum(np.asarray(h.weights, dtype=np.float64))) + h.under + h.over
        if not math.isfinite(tot) or tot <= 0:
            continue
        e, f = level_fractions(h, capacity)
        total[i], empty[i] = tot, e
        if f is not None:
            full[i] = f
    return total, empty, full


def _channel_summary(run: Run, series: Sequence[_Series]) -> list[ChannelSummary]:
    vq: dict[str, str] = {}
    try:
        for v in run.virtual_queues():
            if vq.get(v["target"]) != "rejected" and v.get("verdict") is not None:
                vq[v["target"]] = str(v["verdict"])
    except QueryError:  # an older or partial file: no verdicts to report
        vq = {}
    out = []
    for ch in run.topology.channels:
        occ = [s for s in series if s.target == ch.name and s.query.metric == "occupancy"]
        thr = [s for s in series if s.target == ch.name and s.query.metric == "throughput"]
        out.append(_one_channel(ch, occ, thr, vq.get(ch.name)))
    return out


def _one_channel(
    ch: ChannelInfo, occ: Sequence[_Series], thr: Sequence[_Series], verdict: str | None
) -> ChannelSummary:
    mean = _combined(occ, "mean")
    mx = _combined(occ, "max")
    full: float | None = None
    empty: float | None = None
    frames: set[int] = set()
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
    if any_hist and tot_w > 0:
        empty = empty_w / tot_w if empty_known else None
        full = full_w / tot_w if full_known and not ch.is_link else None
    for s in occ:
        frames.update(int(x) for x in s.frames)
    return ChannelSummary(
        ch.name,
        ch.src,
        ch.dst,
        ch.capacity,
        ch.transport,
        mean,
        mx,
        full,
        empty,
        _combined(thr, "mean"),
        ch.is_link,
        verdict,
        tuple(sorted(frames)),
    )


def _combined(series: Sequence[_Series], stat: str) -> float | None:
    """``stat`` over the whole run across several series of one target (their frames pooled)."""
    vals = [s.scalars[stat] for s in series if stat in s.scalars]
    if not vals:
        return None
    cov = [s.covered for s in series if stat in s.scalars]
    return whole_run(np.concatenate(vals), np.concatenate(cov), stat)
