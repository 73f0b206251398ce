"""Virtual-queue estimator (step 3 of Lancaster, Wingbermuehle, Beard & Chamberlain, Crossing
Boundaries in TimeTrial, 2011): one frame's gap histograms (ns; counts), start levels and, where
measured, insertion profile in; the predicted fraction of the frame at each level of the whole
virtual queue and of its tail and head sub-queues out."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from streamscope.core.numeric import dot
from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.occupancy import w1_items
from streamscope.model.replay import Bus, Model, SubQueues, as_level, replay_inserted
from streamscope.model.sampling import (
    HistogramLike,
    Profile,
    histogram,
    renewal_draws,
    renewal_gaps,
    sample_histogram,
    sample_profile,
)

__all__ = [
    "Arrivals",
    "Bus",
    "HistogramLike",
    "Model",
    "Prediction",
    "Profile",
    "SubQueues",
    "condition",
    "level_fractions",
    "predict",
    "replicate",
    "replicates",
    "summarise",
]

#: The models of the insertions. "renewal" (the paper's): gaps drawn i.i.d. from the histogram.
#: "profile": each sub-window gets the measured number of insertions, spaced by gaps drawn from
#: the histogram; it keeps bursts, lulls and rate changes longer than a sub-window, which i.i.d.
#: gaps cannot reproduce.
Arrivals = Literal["renewal", "profile"]


def level_fractions(rows: list[F64]) -> F64:
    """Level weights (one row each) as fractions of their totals, padded with zeros to the
    longest: ``(rows, levels)``."""
    out: F64 = np.zeros((len(rows), max(r.size for r in rows)))
    for i, r in enumerate(rows):
        out[i, : r.size] = r / r.sum()
    return out


def _pad_mean(rows: list[F64]) -> F64:
    out: F64 = level_fractions(rows).mean(axis=0)
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
    """One model replication of a frame: histogram draws through
    :func:`~streamscope.model.replay.simulate_frame`.

    The first insertion comes after a residual gap (:func:`~streamscope.model.sampling.
    sample_residual`: the frame starts at an arbitrary instant), or, with ``residual=False``,
    after a whole gap. With a ``profile`` the insertions are :func:`~streamscope.model.sampling.
    sample_profile`'s instead (``residual`` unused). ``ended``: the producer finished in this
    frame: the stream ends with the last insertion (the profile's, or without one the last gap
    inside the producer's window, ``windows[0]``).

    Out: the frame's :class:`SubQueues` and the number of items inserted during the frame.
    The start items' service times are the first ``start_head + start_tail`` service draws, so
    with both 0 the draws (and results, for a given ``rng`` state) are those of a start from empty.
    """
    if not (math.isfinite(frame_ns) and frame_ns > 0.0):
        raise ModelInputError(f"frame_ns must be finite and > 0, got {frame_ns}")
    k0 = as_level("start_tail", start_tail) + as_level("start_head", start_head)
    inter_insert = histogram(inter_insert, "inter_insert")
    inter_depart = histogram(inter_depart, "inter_depart")
    # The insertion times are the gaps' running sum, taken once here and handed on (as
    # simulate_frame would take it from the gaps).
    if profile is not None:
        times = sample_profile(inter_insert, profile, rng)
        times = times[times < frame_ns]
        # np.diff(times, prepend=0.0), the same subtractions without its concatenation
        gaps, inserted = np.empty(times.size), int(times.size)
        gaps[:1] = times[:1] - 0.0
        np.subtract(times[1:], times[:-1], out=gaps[1:])
        at = np.cumsum(gaps)
    elif ended:
        # The producer finished in this frame, its side measured up to then: i.i.d. gaps up to
        # the end of that window and none after (the stream ends with the last of them).
        cut = frame_ns if windows is None else min(float(windows[0]), frame_ns)
        gaps = renewal_gaps(inter_insert, cut, renewal_draws(inter_insert, cut), rng,
                            residual=residual)  # fmt: skip
        at = np.cumsum(gaps)
        inserted = int(np.searchsorted(at, cut, side="left"))
        gaps, at = gaps[:inserted], at[:inserted]
    else:
        n = renewal_draws(inter_insert, frame_ns)
        gaps = renewal_gaps(inter_insert, frame_ns, n, rng, residual=residual)
        at = np.cumsum(gaps)
        inserted = int(np.searchsorted(at, frame_ns, side="left"))
    service = sample_histogram(inter_depart, k0 + gaps.size, rng)
    occ = replay_inserted(
        at, service, frame_ns, model, bus, start_tail=start_tail, start_head=start_head,
        windows=windows, ended=ended,
    )  # fmt: skip
    return occ, inserted


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
    # checked once for the n runs (each replication draws from them many times)
    inter_insert = histogram(inter_insert, "inter_insert")
    inter_depart = histogram(inter_depart, "inter_depart")
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
    """Lancaster et al. 2011, step 3 for one frame: histograms (ns; counts) in, a :class:`Prediction` out.

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
        mean_occupancy=dot(np.arange(whole.size), whole),
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
