"""Self-check of the virtual-queue estimator (step 4 of Lancaster, Wingbermuehle, Beard &
Chamberlain, Crossing Boundaries in TimeTrial, 2011): a frame's histograms and measured
sub-queue level distributions in; a per-frame and a run-level consistent/rejected verdict out.

Two questions, kept apart. *Can the buffers tell the model from the link?* W1 (items) between
the measured and predicted buffers, against the model's own replications (chance) plus what the
clocks' uncertainty can shift (clock bias): the paper's test. With enough items any small
structural difference (the bus's exact timing, stamping) is told apart, however small its effect
on the estimate. *Does it matter?* The discrepancy beyond chance and clock bias is how far the
buffers say the model is off, in items of the ends' occupancy; it moves the whole queue's
estimate by at most that much. A frame is rejected when it exceeds the tolerance (the larger of
a share of the estimated mean occupancy and one item), or when the renewal model's dependence
test rejects its i.i.d. gaps; each verdict says which part decided."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike

from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.dependence import Dependence, DependencePool, dependence_test
from streamscope.model.estimator import (
    Arrivals,
    Prediction,
    level_fractions,
    predict,
    replicates,
    summarise,
)
from streamscope.model.occupancy import tv, w1_items
from streamscope.model.replay import Bus, Model, SubQueues
from streamscope.model.sampling import HistogramLike, Profile

__all__ = [
    "Dependence",
    "DependencePool",
    "FrameVerdict",
    "RunVerdict",
    "combine_frames",
    "dependence_test",
    "self_check",
]

Verdict = Literal["consistent", "rejected"]
#: What decided a frame's verdict: its W1 within chance (the model's own replications), within
#: chance plus clock bias, beyond both but within the tolerance; beyond the tolerance
#: (discrepancy); or the renewal model's dependence test.
Decided = Literal["chance", "clock", "tolerance", "discrepancy", "dependence"]
#: The tolerance of an estimate: this share of its mean occupancy, or TOLERANCE_FLOOR_ITEMS
#: if larger.
TOLERANCE = 0.15
TOLERANCE_FLOOR_ITEMS = 1.0


def tolerance_items(mean_items: float, share: float = TOLERANCE) -> float:
    """How far (items) an estimate of mean occupancy ``mean_items`` may be off and still serve:
    ``share`` of it, or ``TOLERANCE_FLOOR_ITEMS`` if larger."""
    return max(share * mean_items, TOLERANCE_FLOOR_ITEMS)


@dataclass(frozen=True, slots=True)
class FrameVerdict:
    """``w1_items``: W1(tail) + W1(head) between measured and predicted level distributions;
    ``tv``: the larger of the two TVs (reported, not tested); ``threshold_items``: the null's
    (1 - alpha) quantile plus ``clock_bias_items`` (1 - alpha/2 with a dependence test, which
    then gets the other alpha/2): above it, the buffers tell the model from the link
    (``distinguishable``). ``excess_items``: W1 beyond the threshold; the frame is rejected when
    it exceeds ``tolerance_items`` (or the dependence test rejects). ``estimate_items``: the
    whole queue's estimated mean occupancy; ``band_items``: how far from it the truth may be for
    all the self-check can tell (W1 or the null quantile, whichever is larger, plus the clock
    bias)."""

    verdict: Verdict
    w1_items: float
    tv: float
    threshold_items: float
    clock_bias_items: float
    null_quantile_items: float
    null_replications: int
    dependence: Dependence | None = None
    decided_by: Decided = "chance"
    excess_items: float = 0.0
    tolerance_items: float = TOLERANCE_FLOOR_ITEMS
    estimate_items: float = 0.0
    band_items: float = 0.0

    @property
    def distinguishable(self) -> bool:
        return self.w1_items > self.threshold_items

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "w1_items": self.w1_items,
            "tv": self.tv,
            "threshold_items": self.threshold_items,
            "clock_bias_items": self.clock_bias_items,
            "null_quantile_items": self.null_quantile_items,
            "null_replications": self.null_replications,
            "dependence": None if self.dependence is None else self.dependence.to_dict(),
            "decided_by": self.decided_by,
            "excess_items": self.excess_items,
            "tolerance_items": self.tolerance_items,
            "estimate_items": self.estimate_items,
            "band_items": self.band_items,
        }


@dataclass(frozen=True, slots=True)
class RunVerdict:
    """Rejected when ``P(Binomial(frames, alpha) >= frames_rejected) < alpha``: more frames
    rejected than chance alone (each frame's false-rejection rate is alpha) explains (with a
    pooled dependence test: either at alpha/2, see :func:`combine_frames`)."""

    verdict: Verdict
    frames_rejected: int
    frames: int
    alpha: float
    p_value: float
    dependence: Dependence | None = None  #: the frames' dependence tests, pooled
    frames_distinguishable: int = 0  #: frames whose W1 was over the threshold, rejected or not

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "frames_rejected": self.frames_rejected,
            "frames": self.frames,
            "alpha": self.alpha,
            "p_value": self.p_value,
            "dependence": None if self.dependence is None else self.dependence.to_dict(),
            "frames_distinguishable": self.frames_distinguishable,
        }


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ModelInputError(f"alpha must be in (0, 1), got {alpha}")


def _check_inputs(
    alpha: float,
    null_replications: int,
    clock_bias_items: float,
    arrivals: Arrivals,
    profile: Profile | None,
) -> None:
    _check_alpha(alpha)
    if null_replications < 1 or not clock_bias_items >= 0.0:
        raise ModelInputError("need null_replications >= 1 and clock_bias_items >= 0")
    if arrivals not in ("renewal", "profile"):
        raise ModelInputError(f"arrivals must be 'renewal' or 'profile', got {arrivals!r}")
    if arrivals == "profile" and profile is None:
        raise ModelInputError("the 'profile' arrivals need the frame's insertion profile")


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
    profile: Profile | None = None,
    arrivals: Arrivals = "renewal",
    pool: DependencePool | None = None,
    dependence_replications: int = 99,
    windows: tuple[float, float] | None = None,
    runs: Sequence[tuple[SubQueues, int]] | None = None,
    tolerance: float = TOLERANCE,
    estimate_items: float | None = None,
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

    ``arrivals``: the model of the insertions. "profile" (needs ``profile``): the measured
    insertions per sub-window, as :func:`~streamscope.model.predict` with a profile; the W1
    test alone. "renewal" (i.i.d. gaps): with a ``profile`` the frame is also put to
    :func:`dependence_test` (``dependence_replications``; its moments added to ``pool``), and
    each test gets alpha/2; without one, the W1 test alone at alpha. ``windows``: the
    windows the tail and head were measured over (as for :func:`~streamscope.model.predict`;
    the profile's dependence test covers the tail's).

    ``runs``: the model's replications of this frame (:func:`~streamscope.model.estimator.
    replicates`, made as above), to serve as both the prediction (their mean) and the null
    (each scored against the mean of the others) instead of ``prediction`` and
    ``null_replications`` fresh ones: half the simulations for the same test.
    """
    _check_inputs(alpha, null_replications, clock_bias_items, arrivals, profile)
    dep = None
    if arrivals == "renewal" and profile is not None:
        dep_ns = frame_ns if windows is None else float(windows[0])
        dep = dependence_test(
            inter_insert, profile, dep_ns, rng, null_replications=dependence_replications,
            pool=pool,
        )  # fmt: skip
    level = alpha / 2.0 if dep is not None else alpha
    if runs is not None:
        if len(runs) < 2 or prediction is not None:
            raise ModelInputError("runs: give at least 2 replications, and no prediction")
        mean = summarise(runs, model, arrivals)
        w1, tv_max = _stat(measured_tail, measured_head, mean)
        est = mean.mean_occupancy if estimate_items is None else estimate_items
        tol = tolerance_items(est, tolerance)
        return _verdict(w1, tv_max, _loo_null(runs), level, clock_bias_items, dep, tol, est)
    sampled = profile if arrivals == "profile" else None
    pred = prediction
    if pred is None:
        pred = predict(
            inter_insert, inter_depart, frame_ns, rng, model=model, bus=bus,
            replications=replications, start_tail=start_tail, start_head=start_head,
            profile=sampled, windows=windows,
        )  # fmt: skip
    w1, tv_max = _stat(measured_tail, measured_head, pred)
    null_runs = replicates(
        inter_insert, inter_depart, frame_ns, model, bus, rng, null_replications,
        start_tail=start_tail, start_head=start_head, profile=sampled, windows=windows,
    )  # fmt: skip
    null = np.array([_stat(occ.tail, occ.head, pred)[0] for occ, _ in null_runs])
    est = pred.mean_occupancy if estimate_items is None else estimate_items
    tol = tolerance_items(est, tolerance)
    return _verdict(w1, tv_max, null, level, clock_bias_items, dep, tol, est)


def _verdict(
    w1: float,
    tv_max: float,
    null: F64,
    level: float,
    bias: float,
    dep: Dependence | None,
    tol: float,
    estimate: float,
) -> FrameVerdict:
    q = float(np.quantile(null, 1.0 - level, method="higher"))
    threshold = q + bias
    excess = max(0.0, w1 - threshold)
    decided: Decided
    if dep is not None and dep.p_value < level:
        decided = "dependence"
    elif excess > 0.0 and w1 - bias > tol:
        decided = "discrepancy"
    elif excess > 0.0:
        decided = "tolerance"
    elif w1 > q:
        decided = "clock"
    else:
        decided = "chance"
    return FrameVerdict(
        verdict="rejected" if decided in ("dependence", "discrepancy") else "consistent",
        w1_items=w1,
        tv=tv_max,
        threshold_items=threshold,
        clock_bias_items=bias,
        null_quantile_items=q,
        null_replications=int(null.size),
        dependence=dep,
        decided_by=decided,
        excess_items=excess,
        tolerance_items=tol,
        estimate_items=estimate,
        band_items=max(w1, q) + bias,
    )


def _loo_null(runs: Sequence[tuple[SubQueues, int]]) -> F64:
    """W1(tail) + W1(head) of each replication against the mean of the others."""
    n = len(runs)
    total = np.zeros(n)
    for side in (
        level_fractions([o.tail for o, _ in runs]),
        level_fractions([o.head for o, _ in runs]),
    ):
        others = (side.sum(axis=0) - side) / (n - 1)
        total += np.abs(np.cumsum(side - others, axis=1)).sum(axis=1)
    return total


def _binom_sf(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)``."""
    return float(sum(math.comb(n, j) * p**j * (1.0 - p) ** (n - j) for j in range(k, n + 1)))


def combine_frames(
    frames: Sequence[FrameVerdict], alpha: float = 0.05, dependence: Dependence | None = None
) -> RunVerdict:
    """Run-level verdict: one-sided binomial test of the rejected-frame count at level alpha.

    With ``dependence`` (the frames' dependence tests pooled, :class:`DependencePool`) the
    binomial test and it get alpha/2 each, and the run is rejected when either rejects."""
    _check_alpha(alpha)
    n = len(frames)
    k = sum(f.verdict == "rejected" for f in frames)
    p = _binom_sf(k, n, alpha) if n else 1.0
    level = alpha if dependence is None else alpha / 2.0
    bad = p < level or (dependence is not None and dependence.p_value < level)
    return RunVerdict(
        verdict="rejected" if bad else "consistent",
        frames_rejected=k,
        frames=n,
        alpha=alpha,
        p_value=p,
        dependence=dependence,
        frames_distinguishable=sum(f.distinguishable for f in frames),
    )
