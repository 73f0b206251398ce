"""Virtual-queue estimator (seed 002 step 3): one frame's inter-insertion (or production) and
back-to-back inter-departure histograms (ns; counts), its start levels and, where the producer's
side measured it, its insertion profile (insertions per sub-window) in, the predicted
time-weighted occupancy of the whole virtual queue and of its tail (producer's side) and head
(consumer's side) sub-queues out (fractions of the frame per level).

Two models of the insertions: "renewal" (the seed's: gaps drawn i.i.d. from the histogram) and
"profile" (each sub-window gets the measured number of insertions, spaced by gaps drawn from
the histogram): the second keeps bursts, lulls and rate changes longer than a sub-window, which
i.i.d. gaps cannot reproduce.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.aggregate.points import HistogramPoint
from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.bulk import tandem_bulk
from streamscope.model.occupancy import occupancy_from_events, w1_items
from streamscope.model.recursions import lindley_fifo

__all__ = [
    "Arrivals",
    "Bus",
    "HistogramLike",
    "Model",
    "Prediction",
    "Profile",
    "SubQueues",
    "condition",
    "predict",
    "sample_histogram",
    "sample_profile",
    "simulate_frame",
    "summarise",
]

Model = Literal["ideal", "tandem"]
Arrivals = Literal["renewal", "profile"]
HistogramLike = HistogramPoint | tuple[ArrayLike, ArrayLike]


@dataclass(frozen=True, slots=True)
class Bus:
    """The bulk-transfer bus of the "tandem" model (see :func:`~streamscope.model.tandem_bulk`):
    up to ``bulk_size`` items per transfer of ``transfer_ns``, flushed after ``timeout_ns`` idle;
    items reach the head side ``latency_ns`` after their transfer ends (pipelined: the bus is
    busy only for the transfer), into a buffer of ``capacity2`` places (None: unbounded; else a
    transfer whose items do not fit on arrival is held, and the bus with it, until they do)."""

    bulk_size: int
    transfer_ns: float
    timeout_ns: float = math.inf
    latency_ns: float = 0.0
    capacity2: int | None = None


class Profile(NamedTuple):
    """Insertions measured in consecutive sub-windows of a frame: ``counts[i]`` items in
    ``[i * width_ns, (i + 1) * width_ns)`` from the frame start."""

    counts: ArrayLike
    width_ns: float


class SubQueues(NamedTuple):
    """ns spent at each level ``0, 1, ...`` over one frame (index = level).

    A virtual queue may run host -> device or device -> host; its sub-queues are named by side:
    the tail is the buffer at the producer's side, the head the buffer at the consumer's side.
    """

    whole: F64  #: insertion .. departure (the virtual queue)
    tail: F64  #: insertion .. start of its bus transfer (always 0 in the "ideal" model)
    head: F64  #: delivery to the consumer's side .. departure


def _hist(h: HistogramLike, name: str) -> tuple[F64, F64]:
    edges, weights = (h.edges, h.weights) if isinstance(h, HistogramPoint) else h
    e = np.asarray(edges, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    if e.ndim != 1 or w.ndim != 1 or e.size != w.size + 1 or w.size == 0:
        raise ModelInputError(f"{name}: need m+1 edges and m weights, got {e.size} and {w.size}")
    if not (np.all(np.isfinite(e)) and np.all(np.diff(e) >= 0.0) and e[0] >= 0.0):
        raise ModelInputError(f"{name}: edges must be finite, non-negative and non-decreasing")
    if not (np.all(w >= 0.0) and float(w.sum()) > 0.0):
        raise ModelInputError(f"{name}: weights must be >= 0 with a positive total")
    return e, w


def sample_histogram(h: HistogramLike, n: int, rng: np.random.Generator) -> F64:
    """``n`` draws (ns): a bin with probability proportional to its weight, then uniform within it.

    Only the weights inside the edges are used (a HistogramPoint's ``under``/``over`` are ignored).
    """
    e, w = _hist(h, "histogram")
    cdf = np.cumsum(w)
    idx = np.searchsorted(cdf, rng.random(n) * cdf[-1], side="right")
    idx = np.minimum(idx, w.size - 1)
    out: F64 = e[idx] + rng.random(n) * (e[idx + 1] - e[idx])
    return out


def sample_residual(h: HistogramLike, rng: np.random.Generator) -> float:
    """One draw of the time from an arbitrary instant to the next insertion, for insertions
    whose gaps follow ``h`` (the renewal process's equilibrium residual): a gap drawn in
    proportion to its length, then a uniform point inside it. A frame starts at an arbitrary
    instant, so its first insertion comes after a residual, not after a whole gap (for
    exponential gaps the two agree; for gaps longer than the frame only the residual lets an
    insertion fall inside it)."""
    e, w = _hist(h, "histogram")
    lo, hi = e[:-1], e[1:]
    lw = w * 0.5 * (lo + hi)
    total = float(lw.sum())
    if total <= 0.0:
        return float(sample_histogram(h, 1, rng)[0])
    i = min(int(np.searchsorted(np.cumsum(lw), rng.random() * total, side="right")), w.size - 1)
    # within the bin, density proportional to the gap's length
    gap = math.sqrt(lo[i] ** 2 + rng.random() * (hi[i] ** 2 - lo[i] ** 2))
    return float(rng.random() * gap)


def _profile(p: Profile) -> tuple[NDArray[np.int64], float]:
    c = np.asarray(p.counts)
    w = float(p.width_ns)
    if c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iu" or bool(np.any(c < 0)):
        raise ModelInputError("profile: counts must be a non-empty 1-D array of integers >= 0")
    if not (math.isfinite(w) and w > 0.0):
        raise ModelInputError(f"profile: width_ns must be finite and > 0, got {p.width_ns}")
    return c.astype(np.int64), w


def sample_profile(h: HistogramLike, profile: Profile, rng: np.random.Generator) -> F64:
    """Insertion times (ns, sorted) with exactly ``profile.counts[i]`` in sub-window ``i``.

    In a sub-window holding ``c`` items, ``c + 1`` gaps are drawn from ``h`` and scaled to fill
    it; the items sit at the first ``c`` cumulative sums (for exponential gaps: ``c`` uniform
    points, the Poisson process given its count; for constant gaps: evenly spaced). Only gaps
    shorter than a sub-window are drawn when ``h`` has any: longer ones are what the profile's
    empty sub-windows already show.
    """
    counts, width = _profile(profile)
    e, w = _hist(h, "histogram")
    short = e[1:] <= width
    if bool(np.any(w[short] > 0.0)):
        e, w = e[: int(np.flatnonzero(short)[-1]) + 2], w[short]
    busy = np.flatnonzero(counts)
    if busy.size == 0:
        return np.zeros(0)
    c = counts[busy]
    draws = sample_histogram((e, w), int(c.sum()) + busy.size, rng)
    first = np.concatenate(([0], np.cumsum(c + 1)[:-1]))
    total = np.add.reduceat(draws, first)
    cum = np.cumsum(draws)
    before = np.concatenate(([0.0], cum))[first]  # cumulative sum before each sub-window
    # the items: every draw but the last of each sub-window
    keep = np.ones(draws.size, dtype=bool)
    keep[first + c] = False
    win = np.repeat(np.arange(busy.size), c)
    within = (cum[keep] - before[win]) / np.where(total > 0.0, total, 1.0)[win]
    flat = total[win] <= 0.0  # every gap drawn was 0 ns: spread them evenly instead
    if bool(flat.any()):
        rank = np.arange(win.size) - np.repeat(np.cumsum(c) - c, c)
        within[flat] = (rank[flat] + 1.0) / (c[win[flat]] + 1.0)
    out: F64 = (busy[win] + within) * width
    return out


def _start_level(name: str, value: int) -> int:
    if int(value) != value or value < 0:
        raise ModelInputError(
            f"{name} must be an integer >= 0 (items at the frame start), got {value!r}"
        )
    return int(value)


def simulate_frame(
    gaps: ArrayLike,
    service: ArrayLike,
    frame_ns: float,
    model: Model,
    bus: Bus | None = None,
    *,
    start_tail: int = 0,
    start_head: int = 0,
    windows: tuple[float, float] | None = None,
    ended: bool = False,
) -> SubQueues:
    """Replay one frame: inter-insertion ``gaps`` and per-item ``service`` (ns) in, the ns at
    each level of the whole queue and of its tail and head sub-queues over ``[0, frame_ns)`` out.

    Item ``k`` is inserted at ``a_k = gaps_0 + ... + gaps_k``; only items with ``a_k < frame_ns``
    take part. ``start_tail``/``start_head`` items are already in the tail/head sub-queue at the
    frame start (time 0), ahead of the inserted ones: the head items were delivered at 0, the
    tail items inserted at 0. ``service`` holds one time per item in service order: the head
    items', then the tail items', then the inserted items' (so at least
    ``start_head + start_tail + #inserted`` values).

    An item is in the queue from its insertion until its consumer removes it, which is when
    its service starts (as for every channel: the item being served is not in the channel).
    The consumer removes the next item when it has served the previous one, so the gaps between
    back-to-back removals are the service times. "ideal": one FIFO served in order, service
    finishing at ``d_k = max(a_k, d_{k-1}) + s_k`` and removal at ``d_k - s_k``, starting with
    ``start_tail + start_head`` items at 0; the tail sub-queue is empty and the head sub-queue
    is the whole queue. "tandem": tail buffer, then ``bus``, then the head buffer and its server
    (removal at the service start); the head items skip the bus; the bus's last partial batch
    is flushed at ``frame_ns``.

    ``windows``: ``(tail_ns, head_ns)``, each in ``(0, frame_ns]``: the tail and head
    sub-queues over ``[0, tail_ns)`` and ``[0, head_ns)`` instead (where a side measured less
    of the frame than the whole queue is estimated over). ``ended``: the stream ends with the
    last insertion (the producer finished in this frame), so the bus flushes its partial batch
    then rather than at ``frame_ns``.
    """
    tail_ns, head_ns = _windows(windows, frame_ns)
    tail0 = _start_level("start_tail", start_tail)
    head0 = _start_level("start_head", start_head)
    g = np.asarray(gaps, dtype=np.float64)
    s = np.asarray(service, dtype=np.float64)
    a = np.cumsum(g)
    n = int(np.searchsorted(a, frame_ns, side="left"))
    k0 = tail0 + head0
    if s.ndim != 1 or s.size < k0 + n:
        raise ModelInputError(
            f"service: need {k0 + n} values ({head0} head + {tail0} tail items at the start, "
            f"{n} inserted), got {s.size}"
        )
    a = np.concatenate((np.zeros(k0), a[:n]))
    s = s[: k0 + n]
    if model == "ideal":
        # Removed when its service starts: d_k - s_k = max(a_k, d_{k-1}).
        removed = lindley_fifo(a, s) - s
        whole = occupancy_from_events(a, removed, 0.0, frame_ns)[1]
        head = whole if head_ns == frame_ns else occupancy_from_events(a, removed, 0.0, head_ns)[1]
        return SubQueues(whole, np.array([tail_ns]), head)
    if model != "tandem":
        raise ModelInputError(f"model must be 'ideal' or 'tandem', got {model!r}")
    if bus is None:
        raise ModelInputError("the 'tandem' model needs a Bus")
    if a.size == 0:
        return SubQueues(np.array([frame_ns]), np.array([tail_ns]), np.array([head_ns]))
    t = tandem_bulk(
        a,
        bus.bulk_size,
        bus.transfer_ns,
        bus.timeout_ns,
        s,
        bus.capacity2,
        end_ns=float(a[-1]) if ended else frame_ns,
        latency_ns=bus.latency_ns,
        preloaded=head0,
    )
    return SubQueues(
        occupancy_from_events(a, t.start2, 0.0, frame_ns)[1],
        occupancy_from_events(a, t.start1, 0.0, tail_ns)[1],
        occupancy_from_events(t.deliver, t.start2, 0.0, head_ns)[1],
    )


def _windows(windows: tuple[float, float] | None, frame_ns: float) -> tuple[float, float]:
    if windows is None:
        return frame_ns, frame_ns
    tail_ns, head_ns = (float(w) for w in windows)
    if not (0.0 < tail_ns <= frame_ns and 0.0 < head_ns <= frame_ns):
        raise ModelInputError(
            f"windows must be in (0, frame_ns={frame_ns}] ns, got ({tail_ns}, {head_ns})"
        )
    return tail_ns, head_ns


def _pad_mean(rows: list[F64]) -> F64:
    width = max(r.size for r in rows)
    stack = np.stack([np.pad(r / r.sum(), (0, width - r.size)) for r in rows])
    out: F64 = stack.mean(axis=0)
    return out


@dataclass(frozen=True, slots=True)
class Prediction:
    """Model-predicted fraction of the frame spent at each level (index = level), averaged over
    the replications, for the whole virtual queue and its tail (producer's side) and head
    (consumer's side) sub-queues."""

    model: str
    whole: tuple[float, ...]
    tail: tuple[float, ...]
    head: tuple[float, ...]
    mean_occupancy: float  #: mean items in the whole virtual queue
    items_simulated: int  #: inserted items, over all replications
    replications: int
    arrivals: str = "renewal"  #: "renewal" (i.i.d. gaps) or "profile"

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "arrivals": self.arrivals,
            "whole": list(self.whole),
            "tail": list(self.tail),
            "head": list(self.head),
            "mean_occupancy": self.mean_occupancy,
            "items_simulated": self.items_simulated,
            "replications": self.replications,
        }


def replicate(
    inter_insert: HistogramLike,
    inter_depart: HistogramLike,
    frame_ns: float,
    model: Model,
    bus: Bus | None,
    rng: np.random.Generator,
    *,
    start_tail: int = 0,
    start_head: int = 0,
    residual: bool = True,
    profile: Profile | None = None,
    windows: tuple[float, float] | None = None,
    ended: bool = False,
) -> tuple[SubQueues, int]:
    """One model replication of a frame: histogram draws through :func:`simulate_frame`.

    The first insertion comes after a residual gap (:func:`sample_residual`: the frame starts
    at an arbitrary instant), or, with ``residual=False``, after a whole gap. With a
    ``profile`` the insertions are :func:`sample_profile`'s instead (``residual`` unused).

    Out: the frame's :class:`SubQueues` and the number of items inserted during the frame.
    The start items' service times are the first ``start_head + start_tail`` service draws, so
    with both 0 the draws (and results, for a given ``rng`` state) are those of a start from empty.
    """
    if not (math.isfinite(frame_ns) and frame_ns > 0.0):
        raise ModelInputError(f"frame_ns must be finite and > 0, got {frame_ns}")
    k0 = _start_level("start_tail", start_tail) + _start_level("start_head", start_head)
    if profile is not None:
        times = sample_profile(inter_insert, profile, rng)
        times = times[times < frame_ns]
        service = sample_histogram(inter_depart, k0 + times.size, rng)
        occ = simulate_frame(
            np.diff(times, prepend=0.0), service, frame_ns, model, bus,
            start_tail=start_tail, start_head=start_head, windows=windows, ended=ended,
        )  # fmt: skip
        return occ, int(times.size)
    e, w = _hist(inter_insert, "inter_insert")
    mean_gap = float(np.dot(w, 0.5 * (e[:-1] + e[1:])) / w.sum())
    if mean_gap <= 0.0:
        raise ModelInputError("inter_insert: mean inter-insertion time must be > 0 ns")
    expect = frame_ns / mean_gap
    n = int(expect + 6.0 * math.sqrt(expect) + 16.0)
    gaps = sample_histogram(inter_insert, n, rng)
    if residual:
        gaps[0] = sample_residual(inter_insert, rng)
    while float(gaps.sum()) < frame_ns:  # rare: top up until the frame is covered
        gaps = np.concatenate((gaps, sample_histogram(inter_insert, n, rng)))
    service = sample_histogram(inter_depart, k0 + gaps.size, rng)
    occ = simulate_frame(
        gaps, service, frame_ns, model, bus, start_tail=start_tail, start_head=start_head,
        windows=windows, ended=ended,
    )  # fmt: skip
    return occ, int(np.searchsorted(np.cumsum(gaps), frame_ns, side="left"))


def replicates(
    inter_insert: HistogramLike,
    inter_depart: HistogramLike,
    frame_ns: float,
    model: Model,
    bus: Bus | None,
    rng: np.random.Generator,
    n: int,
    *,
    start_tail: int = 0,
    start_head: int = 0,
    residual: bool = True,
    profile: Profile | None = None,
    windows: tuple[float, float] | None = None,
    ended: bool = False,
) -> list[tuple[SubQueues, int]]:
    """``n`` independent :func:`replicate` runs of the same frame, in order (one rng stream)."""
    starts = {"start_tail": start_tail, "start_head": start_head}
    return [
        replicate(
            inter_insert,
            inter_depart,
            frame_ns,
            model,
            bus,
            rng,
            **starts,
            residual=residual,
            profile=profile,
            windows=windows,
            ended=ended,
        )
        for _ in range(n)
    ]


def predict(
    inter_insert: HistogramLike,
    inter_depart: HistogramLike,
    frame_ns: float,
    rng: np.random.Generator,
    *,
    model: Model = "ideal",
    bus: Bus | None = None,
    replications: int = 8,
    start_tail: int = 0,
    start_head: int = 0,
    residual: bool = True,
    profile: Profile | None = None,
    windows: tuple[float, float] | None = None,
) -> Prediction:
    """Seed 002 step 3 for one frame: histograms (ns; counts) in, a :class:`Prediction` out.

    Gaps between insertions are drawn i.i.d. from ``inter_insert``. That histogram may hold
    the inter-insertion times or, when the caller measured them, the producer's *production*
    times (time to make each item, without time blocked on a full buffer), which is the better
    input: inter-insertion gaps of a blocked producer already carry the queue's back-pressure.
    Service times are drawn i.i.d. from ``inter_depart``, which must hold the gaps between
    *back-to-back* departures (head sub-queue non-empty): gaps that include idle time would
    overstate the service time.

    Each replication covers ``frame_ns`` from the frame start, where ``start_tail`` and
    ``start_head`` items (measured by the caller; 0: the frame starts empty) are already in the
    tail and head sub-queues (see :func:`simulate_frame`). The first insertion comes after a
    residual gap (``residual=False``: a whole one, e.g. to model no insertion at all).

    With a ``profile`` (the insertions measured per sub-window of the frame) the insertions are
    :func:`sample_profile`'s: the measured count in each sub-window, spaced by gaps drawn from
    ``inter_insert`` (the "profile" model); without one, the "renewal" model above.
    ``windows``: the tail's and head's windows, as for :func:`simulate_frame`.
    """
    if replications < 1:
        raise ModelInputError(f"replications must be >= 1, got {replications}")
    runs = replicates(
        inter_insert, inter_depart, frame_ns, model, bus, rng, replications,
        start_tail=start_tail, start_head=start_head, residual=residual, profile=profile,
        windows=windows,
    )  # fmt: skip
    return summarise(runs, model, "renewal" if profile is None else "profile")


def summarise(runs: Sequence[tuple[SubQueues, int]], model: str, arrivals: str) -> Prediction:
    """Replications (:func:`replicates`' output) averaged into a :class:`Prediction`."""
    if not runs:
        raise ModelInputError("no replication to summarise")
    whole = _pad_mean([r[0].whole for r in runs])
    return Prediction(
        model=model,
        whole=tuple(whole.tolist()),
        tail=tuple(_pad_mean([r[0].tail for r in runs]).tolist()),
        head=tuple(_pad_mean([r[0].head for r in runs]).tolist()),
        mean_occupancy=float(np.dot(np.arange(whole.size), whole)),
        items_simulated=sum(r[1] for r in runs),
        replications=len(runs),
        arrivals=arrivals,
    )


def condition(
    runs: Sequence[tuple[SubQueues, int]],
    measured_tail: ArrayLike,
    measured_head: ArrayLike,
    keep: int,
    model: str,
    arrivals: str,
) -> Prediction:
    """The model's prediction given what was measured: the mean of the ``keep`` replications
    whose tail and head sub-queues come closest (W1, summed) to the measured level weights.

    A nearest-neighbour estimate of the whole queue's levels given its two visible ends: what
    the replications disagree on that the ends show (how long the consumer's services happened
    to take, say) is taken as measured, not averaged over. Ties keep the earlier replication.
    """
    if not 1 <= keep <= len(runs):
        raise ModelInputError(f"keep must be in 1..{len(runs)} (the replications), got {keep}")
    d = np.array([w1_items(o.tail, measured_tail) + w1_items(o.head, measured_head)
                  for o, _ in runs])  # fmt: skip
    near = np.argsort(d, kind="stable")[:keep]
    return summarise([runs[int(i)] for i in near], model, arrivals)
