"""Virtual-queue estimator (seed 002 step 3): one frame's inter-insertion (or production) and
back-to-back inter-departure histograms (ns; counts) and its start levels in, the predicted
time-weighted occupancy of the whole virtual queue and of its tail (producer's side) and head
(consumer's side) sub-queues out (fractions of the frame per level).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from streamscope.aggregate.points import HistogramPoint
from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.bulk import tandem_bulk
from streamscope.model.occupancy import occupancy_from_events
from streamscope.model.recursions import lindley_fifo

__all__ = [
    "Bus",
    "HistogramLike",
    "Model",
    "Prediction",
    "SubQueues",
    "predict",
    "sample_histogram",
    "simulate_frame",
]

Model = Literal["ideal", "tandem"]
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
    """
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
        return SubQueues(whole, np.array([frame_ns]), whole)
    if model != "tandem":
        raise ModelInputError(f"model must be 'ideal' or 'tandem', got {model!r}")
    if bus is None:
        raise ModelInputError("the 'tandem' model needs a Bus")
    if a.size == 0:
        empty = np.array([frame_ns])
        return SubQueues(empty, empty, empty)
    t = tandem_bulk(
        a,
        bus.bulk_size,
        bus.transfer_ns,
        bus.timeout_ns,
        s,
        bus.capacity2,
        end_ns=frame_ns,
        latency_ns=bus.latency_ns,
        preloaded=head0,
    )
    return SubQueues(
        occupancy_from_events(a, t.start2, 0.0, frame_ns)[1],
        occupancy_from_events(a, t.start1, 0.0, frame_ns)[1],
        occupancy_from_events(t.deliver, t.start2, 0.0, frame_ns)[1],
    )


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
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
) -> tuple[SubQueues, int]:
    """One model replication of a frame: histogram draws through :func:`simulate_frame`.

    The first insertion comes after a residual gap (:func:`sample_residual`: the frame starts
    at an arbitrary instant), or, with ``residual=False``, after a whole gap.

    Out: the frame's :class:`SubQueues` and the number of items inserted during the frame.
    The start items' service times are the first ``start_head + start_tail`` service draws, so
    with both 0 the draws (and results, for a given ``rng`` state) are those of a start from empty.
    """
    if not (math.isfinite(frame_ns) and frame_ns > 0.0):
        raise ModelInputError(f"frame_ns must be finite and > 0, got {frame_ns}")
    k0 = _start_level("start_tail", start_tail) + _start_level("start_head", start_head)
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
        gaps, service, frame_ns, model, bus, start_tail=start_tail, start_head=start_head
    )
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
) -> list[tuple[SubQueues, int]]:
    """``n`` independent :func:`replicate` runs of the same frame, in order (one rng stream)."""
    starts = {"start_tail": start_tail, "start_head": start_head}
    return [
        replicate(
            inter_insert, inter_depart, frame_ns, model, bus, rng, **starts, residual=residual
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
    """
    if replications < 1:
        raise ModelInputError(f"replications must be >= 1, got {replications}")
    runs = replicates(
        inter_insert, inter_depart, frame_ns, model, bus, rng, replications,
        start_tail=start_tail, start_head=start_head, residual=residual,
    )  # fmt: skip
    whole = _pad_mean([r[0].whole for r in runs])
    return Prediction(
        model=model,
        whole=tuple(whole.tolist()),
        tail=tuple(_pad_mean([r[0].tail for r in runs]).tolist()),
        head=tuple(_pad_mean([r[0].head for r in runs]).tolist()),
        mean_occupancy=float(np.dot(np.arange(whole.size), whole)),
        items_simulated=sum(r[1] for r in runs),
        replications=replications,
    )
