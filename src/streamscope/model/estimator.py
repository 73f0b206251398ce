"""Virtual-queue estimator (seed 002 step 3): one frame's inter-insertion and back-to-back
inter-departure histograms (ns; counts) in, the predicted time-weighted occupancy of the whole
virtual queue and of its host- and device-side sub-queues out (fractions of the frame per level).
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
    up to ``bulk_size`` items per transfer of ``transfer_ns``, flushed after ``timeout_ns`` idle."""

    bulk_size: int
    transfer_ns: float
    timeout_ns: float = math.inf


class SubQueues(NamedTuple):
    """ns spent at each level ``0, 1, ...`` over one frame (index = level)."""

    whole: F64  #: insertion .. departure (the virtual queue)
    host: F64  #: insertion .. start of its bus transfer (always 0 in the "ideal" model)
    device: F64  #: delivery to the device .. departure


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


def simulate_frame(
    gaps: ArrayLike, service: ArrayLike, frame_ns: float, model: Model, bus: Bus | None = None
) -> SubQueues:
    """Replay one frame from empty: inter-insertion ``gaps`` and per-item ``service`` (ns) in.

    Item ``k`` is inserted at ``a_k = gaps_0 + ... + gaps_k``; only items with ``a_k < frame_ns``
    take part. "ideal": one FIFO, ``d_k = max(a_k, d_{k-1}) + s_k`` (an item is removed, i.e.
    leaves the queue, when its back-to-back departure gap has elapsed); the host sub-queue is
    empty and the device sub-queue is the whole queue. "tandem": host buffer, then ``bus``, then
    the device buffer and that server; the bus's last partial batch is flushed at ``frame_ns``.
    """
    g = np.asarray(gaps, dtype=np.float64)
    s = np.asarray(service, dtype=np.float64)
    a = np.cumsum(g)
    n = int(np.searchsorted(a, frame_ns, side="left"))
    a, s = a[:n], s[:n]
    if model == "ideal":
        d = lindley_fifo(a, s)
        whole = occupancy_from_events(a, d, 0.0, frame_ns)[1]
        return SubQueues(whole, np.array([frame_ns]), whole)
    if model != "tandem":
        raise ModelInputError(f"model must be 'ideal' or 'tandem', got {model!r}")
    if bus is None:
        raise ModelInputError("the 'tandem' model needs a Bus")
    if n == 0:
        empty = np.array([frame_ns])
        return SubQueues(empty, empty, empty)
    t = tandem_bulk(a, bus.bulk_size, bus.transfer_ns, bus.timeout_ns, s, end_ns=frame_ns)
    return SubQueues(
        occupancy_from_events(a, t.depart, 0.0, frame_ns)[1],
        occupancy_from_events(a, t.start1, 0.0, frame_ns)[1],
        occupancy_from_events(t.deliver, t.depart, 0.0, frame_ns)[1],
    )


def _pad_mean(rows: list[F64]) -> F64:
    width = max(r.size for r in rows)
    stack = np.stack([np.pad(r / r.sum(), (0, width - r.size)) for r in rows])
    out: F64 = stack.mean(axis=0)
    return out


@dataclass(frozen=True, slots=True)
class Prediction:
    """Model-predicted fraction of the frame spent at each level (index = level), averaged over
    the replications, for the whole virtual queue and the two visible sub-queues."""

    model: str
    whole: tuple[float, ...]
    host: tuple[float, ...]
    device: tuple[float, ...]
    mean_occupancy: float  #: mean items in the whole virtual queue
    items_simulated: int  #: inserted items, over all replications
    replications: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "whole": list(self.whole),
            "host": list(self.host),
            "device": list(self.device),
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
) -> tuple[SubQueues, int]:
    """One model replication of a frame: histogram draws through :func:`simulate_frame`."""
    if not (math.isfinite(frame_ns) and frame_ns > 0.0):
        raise ModelInputError(f"frame_ns must be finite and > 0, got {frame_ns}")
    e, w = _hist(inter_insert, "inter_insert")
    mean_gap = float(np.dot(w, 0.5 * (e[:-1] + e[1:])) / w.sum())
    if mean_gap <= 0.0:
        raise ModelInputError("inter_insert: mean inter-insertion time must be > 0 ns")
    expect = frame_ns / mean_gap
    n = int(expect + 6.0 * math.sqrt(expect) + 16.0)
    gaps = sample_histogram(inter_insert, n, rng)
    while float(gaps.sum()) < frame_ns:  # rare: top up until the frame is covered
        gaps = np.concatenate((gaps, sample_histogram(inter_insert, n, rng)))
    service = sample_histogram(inter_depart, gaps.size, rng)
    occ = simulate_frame(gaps, service, frame_ns, model, bus)
    return occ, int(np.searchsorted(np.cumsum(gaps), frame_ns, side="left"))


def predict(
    inter_insert: HistogramLike,
    inter_depart: HistogramLike,
    frame_ns: float,
    rng: np.random.Generator,
    *,
    model: Model = "ideal",
    bus: Bus | None = None,
    replications: int = 8,
) -> Prediction:
    """Seed 002 step 3 for one frame.

    Gaps between insertions are drawn i.i.d. from ``inter_insert``; service times i.i.d. from
    ``inter_depart``, which must hold the gaps between *back-to-back* departures (head sub-queue
    non-empty): gaps that include idle time would overstate the service time. Each replication
    starts empty at the frame start and covers ``frame_ns``.
    """
    if replications < 1:
        raise ModelInputError(f"replications must be >= 1, got {replications}")
    runs = [
        replicate(inter_insert, inter_depart, frame_ns, model, bus, rng)
        for _ in range(replications)
    ]
    whole = _pad_mean([r[0].whole for r in runs])
    return Prediction(
        model=model,
        whole=tuple(whole.tolist()),
        host=tuple(_pad_mean([r[0].host for r in runs]).tolist()),
        device=tuple(_pad_mean([r[0].device for r in runs]).tolist()),
        mean_occupancy=float(np.dot(np.arange(whole.size), whole)),
        items_simulated=sum(r[1] for r in runs),
        replications=replications,
    )
