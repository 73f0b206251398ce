"""Self-check of the virtual-queue estimator (seed 002 step 4): a frame's histograms and measured
sub-queue level distributions in, a per-frame and a run-level consistent/rejected verdict out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from streamscope.model._inputs import ModelInputError
from streamscope.model.estimator import (
    Bus,
    HistogramLike,
    Model,
    Prediction,
    predict,
    replicates,
)
from streamscope.model.occupancy import tv, w1_items

__all__ = ["FrameVerdict", "RunVerdict", "combine_frames", "self_check"]

Verdict = Literal["consistent", "rejected"]


@dataclass(frozen=True, slots=True)
class FrameVerdict:
    """``w1_items``: W1(tail) + W1(head) between measured and predicted level distributions;
    ``tv``: the larger of the two TVs (reported, not tested); ``threshold_items``: the null's
    (1 - alpha) quantile plus ``clock_bias_items``."""

    verdict: Verdict
    w1_items: float
    tv: float
    threshold_items: float
    clock_bias_items: float
    null_quantile_items: float
    null_replications: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "w1_items": self.w1_items,
            "tv": self.tv,
            "threshold_items": self.threshold_items,
            "clock_bias_items": self.clock_bias_items,
            "null_quantile_items": self.null_quantile_items,
            "null_replications": self.null_replications,
        }


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """Rejected when ``P(Binomial(frames, alpha) >= frames_rejected) < alpha``: more frames
    rejected than chance alone (each frame's false-rejection rate is alpha) explains."""

    verdict: Verdict
    frames_rejected: int
    frames: int
    alpha: float
    p_value: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "frames_rejected": self.frames_rejected,
            "frames": self.frames,
            "alpha": self.alpha,
            "p_value": self.p_value,
        }


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ModelInputError(f"alpha must be in (0, 1), got {alpha}")


def _stat(tail: ArrayLike, head: ArrayLike, pred: Prediction) -> tuple[float, float]:
    w1 = w1_items(tail, pred.tail) + w1_items(head, pred.head)
    return w1, max(tv(tail, pred.tail), tv(head, pred.head))


def self_check(
    inter_insert: HistogramLike,
    inter_depart: HistogramLike,
    frame_ns: float,
    measured_tail: ArrayLike,
    measured_head: ArrayLike,
    rng: np.random.Generator,
    *,
    model: Model = "ideal",
    bus: Bus | None = None,
    prediction: Prediction | None = None,
    replications: int = 8,
    null_replications: int = 39,
    alpha: float = 0.05,
    clock_bias_items: float = 0.0,
    start_tail: int = 0,
    start_head: int = 0,
) -> FrameVerdict:
    """Measured sub-queue level weights (ns or fractions, index = level) against the model:
    the frame's histograms (as for :func:`~streamscope.model.predict`), the measured tail
    (producer's side) and head (consumer's side) level weights and the levels at the frame
    start in, a :class:`FrameVerdict` out.

    The statistic is taken against ``prediction`` (made here with ``replications`` if None;
    a given one should have been made with the same ``start_tail``/``start_head``).
    Its null distribution: ``null_replications`` further, independent model replications of the
    same frame length, each scored against the same prediction exactly as the measurement is.
    ``clock_bias_items`` (throughput x timing uncertainty, from the caller) widens the threshold.
    """
    _check_alpha(alpha)
    if null_replications < 1 or not clock_bias_items >= 0.0:
        raise ModelInputError("need null_replications >= 1 and clock_bias_items >= 0")
    pred = prediction
    if pred is None:
        pred = predict(
            inter_insert,
            inter_depart,
            frame_ns,
            rng,
            model=model,
            bus=bus,
            replications=replications,
            start_tail=start_tail,
            start_head=start_head,
        )
    w1, tv_max = _stat(measured_tail, measured_head, pred)
    runs = replicates(
        inter_insert, inter_depart, frame_ns, model, bus, rng, null_replications,
        start_tail=start_tail, start_head=start_head,
    )  # fmt: skip
    null = np.array([_stat(occ.tail, occ.head, pred)[0] for occ, _ in runs])
    q = float(np.quantile(null, 1.0 - alpha, method="higher"))
    threshold = q + clock_bias_items
    return FrameVerdict(
        verdict="rejected" if w1 > threshold else "consistent",
        w1_items=w1,
        tv=tv_max,
        threshold_items=threshold,
        clock_bias_items=clock_bias_items,
        null_quantile_items=q,
        null_replications=null_replications,
    )


def _binom_sf(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``."""
    return float(sum(math.comb(n, j) * p**j * (1.0 - p) ** (n - j) for j in range(k, n + 1)))


def combine_frames(frames: Sequence[FrameVerdict], alpha: float = 0.05) -> RunVerdict:
    """Run-level verdict: one-sided binomial test of the rejected-frame count at level alpha."""
    _check_alpha(alpha)
    n = len(frames)
    k = sum(f.verdict == "rejected" for f in frames)
    p = _binom_sf(k, n, alpha) if n else 1.0
    return RunVerdict(
        verdict="rejected" if p < alpha else "consistent",
        frames_rejected=k,
        frames=n,
        alpha=alpha,
        p_value=p,
    )
