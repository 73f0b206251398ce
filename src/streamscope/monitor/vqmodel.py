"""One virtual-queue frame's models and self-checks (Lancaster, Wingbermuehle, Beard &
Chamberlain, Crossing Boundaries in TimeTrial, 2011), from its two sub-queues.

In: a frame's summaries of the tail and head sub-queues (levels, gap histograms, the insertion
profile), the bus between them, and how far the device's frame edges may be from the host's.
Out: the predicted whole-queue level fractions, the self-checks' verdicts (each frame's, and the
renewal model's beside the profile model's, its dependence test pooled over the run), and the
frame's row and levels for the run file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import Point, ScalarPoint
from streamscope.aggregate.subqueue import SubQueueSummary
from streamscope.model import Bus, predict, self_check
from streamscope.model.estimator import (
    Arrivals,
    HistogramLike,
    Prediction,
    Profile,
    SubQueues,
    condition,
    replicates,
    summarise,
)
from streamscope.model.selfcheck import TOLERANCE, DependencePool, FrameVerdict

F64 = NDArray[np.float64]
#: Level of each frame's self-check (and of the run's binomial test over frames).
ALPHA = 0.05
#: Replications of a model per frame (its prediction, and the null of its self-check, each
#: replication against the others: 39 makes the 95 % quantile exact), and how many of those
#: nearest the measured sub-queues make the profile model's estimate.
REPLICATIONS = 39
NEAREST = 10
#: Spacing inside a sub-window when a frame's insertions left no gap to sample (at most one
#: insertion, or refused records): uniform.
FLAT: HistogramLike = (np.array([0.0, 1.0]), np.ones(1))


@dataclass(frozen=True, slots=True)
class FrameInputs:
    """One frame's model inputs: the gap histogram (None: none; ``assumed``: made up, as no gap
    was measured), the service histogram, the insertion profile (None: not measured), and the
    windows (ns from the frame start) of the checks and of the estimate."""

    arrivals: HistogramLike | None
    assumed: bool
    service: HistogramLike
    profile: Profile | None
    span: float  #: the window of the estimate (the frame's, when it is the run's last)
    windows: tuple[float, float] | None  #: the tail's and head's, where shorter than the span
    final: bool  #: the run's last frame (its producer stops in it)
    edge: bool  #: the run's first or last frame (its producer starts or stops in it)


@dataclass(frozen=True, slots=True)
class Estimate:
    """A frame's estimates, kept to compare with the truth once the run has ended."""

    frame: int
    whole: F64
    ideal: F64
    renewal: F64 | None
    covered_ns: int


@dataclass(frozen=True, slots=True)
class _Measured:
    """What a frame's two sub-queues measured: their level fractions, their levels at its
    start, and the window of the estimate (ns)."""

    tail: F64
    head: F64
    start_tail: int
    start_head: int
    length: float


@dataclass(frozen=True, slots=True)
class _Predictions:
    """A frame's model runs: the model used (``use``) and what it drew from, its replications,
    prediction and estimate, the ideal model's, and the renewal model's beside them."""

    use: Arrivals
    drawn: HistogramLike
    runs: list[tuple[SubQueues, int]]
    pred: Prediction
    est: Prediction
    ideal: Prediction
    renewal: Prediction | None
    renewal_runs: list[tuple[SubQueues, int]] | None


@dataclass(slots=True)
class FrameModels:
    """The models of one virtual queue, frame after frame (mutable: verdicts and the pooled
    dependence test gather over the run)."""

    bus: Bus
    seed: int
    key: int
    keep_truth: bool = False
    tolerance: float = TOLERANCE  #: of each frame's verdict, as a share of its estimate
    verdicts: list[FrameVerdict] = field(default_factory=list)
    renewal_verdicts: list[FrameVerdict] = field(default_factory=list)
    dependence: DependencePool = field(default_factory=DependencePool)
    w1_sum: float = 0.0
    estimates: list[Estimate] = field(default_factory=list)

    def model(
        self,
        row: dict[str, Any],
        levels: dict[str, F64],
        extra: list[Point],
        tail: SubQueueSummary,
        head: SubQueueSummary,
        x: FrameInputs,
        misalign_ns: float,
        frame: int,
        covered: int,
    ) -> F64:
        """One frame's models and checks: fills ``row``, ``levels`` and ``extra``; returns the
        predicted whole-queue level fractions.

        The model used draws the insertions from the profile where there is one, else i.i.d.
        from the gap histogram (the paper's renewal model); the renewal model is also run and
        checked beside the profile one, as a diagnostic (its dependence tests pooled, but for
        the run's first and last frames: a producer that starts or stops is no dependence
        between its gaps). The
        profile model's estimate is its replications nearest the measured ends (``condition``);
        its check, as the paper's, takes their mean."""
        rng = np.random.default_rng((self.seed, self.key, frame))
        m = _Measured(
            _fractions(tail.level_ticks), _fractions(head.level_ticks),
            tail.level_start, head.level_start, x.span,
        )  # fmt: skip
        p = self._predict(x, m, rng)
        pred, est, ideal, renewal = p.pred, p.est, p.ideal, p.renewal
        bias = head.n_out / (m.length if x.windows is None else x.windows[1]) * misalign_ns
        whole = np.asarray(est.whole, dtype=np.float64)
        levels.update(
            predicted=whole, ideal=np.asarray(ideal.whole), tail=m.tail, head=m.head,
            tail_predicted=np.asarray(pred.tail), head_predicted=np.asarray(pred.head),
        )  # fmt: skip
        if renewal is not None and renewal is not pred:
            levels["renewal"] = np.asarray(renewal.whole)
        row.update(
            arrivals=p.use, predicted_mean=est.mean_occupancy, ideal_mean=ideal.mean_occupancy,
            renewal_mean=None if renewal is None else renewal.mean_occupancy,
        )  # fmt: skip
        self._check(row, extra, x, m, p, rng, bias, est.mean_occupancy)
        if self.keep_truth:
            self.estimates.append(
                Estimate(frame, whole, np.asarray(ideal.whole),
                          None if renewal is None else np.asarray(renewal.whole), covered)
            )  # fmt: skip
        return whole

    def _predict(self, x: FrameInputs, m: _Measured, rng: np.random.Generator) -> _Predictions:
        """Run the frame's models: the profile model where the tail measured a profile (the
        renewal model beside it), else the renewal model alone."""
        # An assumed input models no insertion: a whole gap, longer than the frame.
        common: dict[str, Any] = {
            "start_tail": m.start_tail, "start_head": m.start_head, "residual": not x.assumed,
            "windows": x.windows,
        }  # fmt: skip
        length, mt, mh = m.length, m.tail, m.head

        def tandem(h: HistogramLike, profile: Profile | None) -> list[tuple[SubQueues, int]]:
            # In the run's last frame (or the one its producer stopped in) the producer has
            # finished: the profile's last insertion ends its stream (without a profile, the
            # last i.i.d. gap inside its side's window), and the bus sends what waits at once
            # (as a link does at the end).
            ended = x.final
            return replicates(h, x.service, length, "tandem", self.bus, rng, REPLICATIONS,
                              profile=profile, ended=ended, **common)  # fmt: skip

        renewal: Prediction | None = None
        renewal_runs: list[tuple[SubQueues, int]] | None = None
        use: Arrivals = "renewal"
        if x.profile is not None:
            use = "profile"
            # The profile places every insertion; without a measured gap, only the spacing
            # inside a sub-window is made up.
            drawn = FLAT if x.assumed or x.arrivals is None else x.arrivals
            runs = tandem(drawn, x.profile)
            pred = summarise(runs, "tandem", use)
            est = condition(runs, mt, mh, NEAREST, "tandem", use)
            ideal = predict(drawn, x.service, length, rng, model="ideal", profile=x.profile,
                            **common)  # fmt: skip
            if x.arrivals is not None:
                renewal_runs = tandem(x.arrivals, None)
                renewal = summarise(renewal_runs, "tandem", "renewal")
        else:
            assert x.arrivals is not None
            drawn = x.arrivals
            runs = renewal_runs = tandem(drawn, None)
            est = pred = renewal = summarise(runs, "tandem", use)
            ideal = predict(drawn, x.service, length, rng, model="ideal", **common)
        return _Predictions(use, drawn, runs, pred, est, ideal, renewal, renewal_runs)

    def _check(
        self,
        row: dict[str, Any],
        extra: list[Point],
        x: FrameInputs,
        m: _Measured,
        p: _Predictions,
        rng: np.random.Generator,
        bias: float,
        estimate: float,
    ) -> None:
        """Self-check the model used (and the renewal model beside the profile one); an
        assumed input cannot be tested, nor a frame whose edges no clock burst pins on the
        device (its bias unbounded: any discrepancy could be the clock's, so none is a
        verdict; ``decided_by`` says ``unbounded``)."""
        if not math.isfinite(bias):
            row.update(decided_by="unbounded")
            return
        use, drawn, runs, renewal_runs = p.use, p.drawn, p.runs, p.renewal_runs
        length, mt, mh = m.length, m.tail, m.head
        check: dict[str, Any] = {
            "model": "tandem", "bus": self.bus, "alpha": ALPHA, "clock_bias_items": bias,
            "start_tail": m.start_tail, "start_head": m.start_head, "profile": x.profile,
            "windows": x.windows, "tolerance": self.tolerance,
        }  # fmt: skip
        if use == "profile" or not x.assumed:
            v = self_check(drawn, x.service, length, mt, mh, rng, runs=runs, arrivals=use,
                           estimate_items=estimate, **check)  # fmt: skip
            self.verdicts.append(v)
            self.w1_sum += v.w1_items
            row.update(
                verdict=v.verdict, w1_items=v.w1_items, tv=v.tv,
                threshold_items=v.threshold_items, null_quantile_items=v.null_quantile_items,
                clock_bias_items=v.clock_bias_items, decided_by=v.decided_by,
                excess_items=v.excess_items, tolerance_items=v.tolerance_items,
                band_items=v.band_items,
            )  # fmt: skip
            extra += [
                ScalarPoint("w1_items", v.w1_items),
                ScalarPoint("threshold_items", v.threshold_items),
                ScalarPoint("clock_bias_items", v.clock_bias_items),
                ScalarPoint("excess_items", v.excess_items),
                ScalarPoint("tolerance_items", v.tolerance_items),
                ScalarPoint("band_items", v.band_items),
                ScalarPoint("rejected", 1.0 if v.verdict == "rejected" else 0.0),
            ]
            rv: FrameVerdict | None = v if use == "renewal" else None
            if (
                use == "profile"
                and x.arrivals is not None
                and renewal_runs is not None
                and not x.assumed
            ):
                # The paper's model on the same frame: would i.i.d. gaps have done?
                rv = self_check(
                    x.arrivals, x.service, length, mt, mh, rng, runs=renewal_runs,
                    arrivals="renewal", pool=None if x.edge else self.dependence,
                    estimate_items=None if p.renewal is None else p.renewal.mean_occupancy,
                    **check,
                )  # fmt: skip
            if rv is not None:
                self.renewal_verdicts.append(rv)
                row.update(
                    renewal_verdict=rv.verdict,
                    dependence_p=None if rv.dependence is None else rv.dependence.p_value,
                )


def _fractions(levels_weight: NDArray[Any]) -> F64:
    w = np.asarray(levels_weight, dtype=np.float64)
    total = float(w.sum())
    return w / total if total > 0 else np.ones(1)
