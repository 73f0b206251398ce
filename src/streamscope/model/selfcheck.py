"""Self-check of the virtual-queue estimator (seed 002 step 4): a frame's histograms and measured
sub-queue level distributions in, a per-frame and a run-level consistent/rejected verdict out.

Where the producer's side measured its insertion profile (insertions per sub-window), the
check of the "renewal" model (i.i.d. gaps) also tests what that model assumes: the profile's
dispersion at every scale against the renewal replications' (:func:`dependence_test`). The W1
test alone has little power there: its threshold comes from replications of the same model,
and for bursty sources those spread as widely as the bursts they put at random places.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.estimator import (
    Arrivals,
    Bus,
    HistogramLike,
    Model,
    Prediction,
    Profile,
    SubQueues,
    _hist,
    _profile,
    predict,
    replicates,
    sample_histogram,
    sample_residual,
    summarise,
)
from streamscope.model.occupancy import tv, w1_items

__all__ = [
    "Dependence",
    "DependencePool",
    "FrameVerdict",
    "RunVerdict",
    "combine_frames",
    "dependence_test",
    "renewal_profiles",
    "self_check",
]

#: Fewest blocks of sub-windows a scale of the dependence test needs.
MIN_BLOCKS = 4
#: Floor of the null's spread of a log-dispersion, and the difference from the null's mean
#: that counts as none: a source whose gaps are i.i.d. but stamped with jitter, or binned,
#: must not be rejected for a few per cent of dispersion.
MIN_SPREAD = 0.1
MIN_EFFECT = 0.1
#: Dispersion (variance over mean) below which counts count as equally regular.
REGULAR = 0.25
#: Average insertions per block of the scale whose clusters the dependence test scores.
CLUSTER_ITEMS = 2.0

Verdict = Literal["consistent", "rejected"]


@dataclass(frozen=True, slots=True)
class Dependence:
    """The dependence test of one frame (or of frames pooled): ``statistic`` is the largest
    ``|z|`` over scales of the measured log-dispersion against the renewal replications',
    ``p_value`` its Monte Carlo p-value (small: the gaps are not i.i.d.)."""

    statistic: float
    p_value: float
    scales: int
    null_replications: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "statistic": self.statistic,
            "p_value": self.p_value,
            "scales": self.scales,
            "null_replications": self.null_replications,
        }


@dataclass(frozen=True, slots=True)
class FrameVerdict:
    """``w1_items``: W1(tail) + W1(head) between measured and predicted level distributions;
    ``tv``: the larger of the two TVs (reported, not tested); ``threshold_items``: the null's
    (1 - alpha) quantile plus ``clock_bias_items`` (1 - alpha/2 with a dependence test, which
    then gets the other alpha/2: a frame is rejected when either test rejects)."""

    verdict: Verdict
    w1_items: float
    tv: float
    threshold_items: float
    clock_bias_items: float
    null_quantile_items: float
    null_replications: int
    dependence: Dependence | None = None

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "frames_rejected": self.frames_rejected,
            "frames": self.frames,
            "alpha": self.alpha,
            "p_value": self.p_value,
            "dependence": None if self.dependence is None else self.dependence.to_dict(),
        }


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ModelInputError(f"alpha must be in (0, 1), got {alpha}")


def renewal_profiles(
    inter_insert: HistogramLike,
    width_ns: float,
    sub_windows: int,
    rng: np.random.Generator,
    n: int,
    *,
    residual: bool = True,
) -> NDArray[np.int64]:
    """``n`` renewal replications (gaps i.i.d. from ``inter_insert``, the first a residual) of
    the insertions per sub-window over ``sub_windows`` sub-windows of ``width_ns``: ``(n,
    sub_windows)`` counts, the null of :func:`dependence_test`."""
    span = width_ns * sub_windows
    out = np.zeros((n, sub_windows), dtype=np.int64)
    mean_gap = _mean_gap(inter_insert)
    expect = span / mean_gap
    m = int(expect + 6.0 * math.sqrt(expect) + 16.0)
    for r in range(n):
        gaps = sample_histogram(inter_insert, m, rng)
        if residual:
            gaps[0] = sample_residual(inter_insert, rng)
        while float(gaps.sum()) < span:  # rare: top up until the span is covered
            gaps = np.concatenate((gaps, sample_histogram(inter_insert, m, rng)))
        t = np.cumsum(gaps)
        t = t[t < span]
        sub = (t // width_ns).astype(np.int64)
        out[r] = np.bincount(sub, minlength=sub_windows)[:sub_windows]
    return out


def _mean_gap(h: HistogramLike) -> float:
    e, w = _hist(h, "inter_insert")
    mean = float(np.dot(w, 0.5 * (e[:-1] + e[1:])) / w.sum())
    if not mean > 0.0:
        raise ModelInputError("inter_insert: mean inter-insertion time must be > 0 ns")
    return mean


def _scales(sub_windows: int) -> list[int]:
    """Block sizes 1, 2, 4, ... sub-windows while a frame holds at least MIN_BLOCKS blocks."""
    out, m = [], 1
    while sub_windows // m >= MIN_BLOCKS:
        out.append(m)
        m *= 2
    return out


def _clusters(x: F64) -> F64:
    """``(n, sum, sum of squares)`` of the cluster sizes of each row of block counts ``x``
    (a cluster: a maximal run of non-empty blocks; its size: the items in it): ``(rows, 3)``."""
    rows, nb = x.shape
    # every row at once: a zero column between rows keeps their runs apart
    flat = np.concatenate((x, np.zeros((rows, 1))), axis=1).ravel()
    edge = np.diff(np.concatenate(([0], (flat > 0.0).astype(np.int8), [0])))
    start, stop = np.flatnonzero(edge == 1), np.flatnonzero(edge == -1)
    cum = np.concatenate(([0.0], np.cumsum(flat)))
    size = cum[stop] - cum[start]
    row = start // (nb + 1)
    return np.stack(
        [
            np.bincount(row, minlength=rows).astype(np.float64),
            np.bincount(row, weights=size, minlength=rows),
            np.bincount(row, weights=size * size, minlength=rows),
        ],
        axis=1,
    )


def _moments(counts: NDArray[np.int64], scales: list[int]) -> F64:
    """Per row of ``counts`` (insertions per sub-window) and per block size ``m`` of
    ``scales``: ``(n, sum, sum of squares)`` of the insertions per block of ``m`` sub-windows
    (entries ``0..S-1``), then of the sizes of the clusters of non-empty blocks (entries
    ``S..2S-1``). Shape ``(rows, 2S, 3)``; moments add over frames, so frames pool by summing."""
    c = np.atleast_2d(counts).astype(np.float64)
    rows, k = c.shape
    ns = len(scales)
    out = np.zeros((rows, 2 * ns, 3))
    for j, m in enumerate(scales):
        nb = k // m
        if nb == 0:
            continue
        x = c[:, : nb * m].reshape(rows, nb, m).sum(axis=2)
        out[:, j] = np.stack([np.full(rows, float(nb)), x.sum(axis=1), (x * x).sum(axis=1)], 1)
        out[:, ns + j] = _clusters(x)
    return out


def _log_dispersion(mom: F64) -> F64:
    """``log((max(var, REGULAR * mean) + 1) / (mean + 1))`` from moments (``(..., 3)``);
    NaN where n < 2. Below ``REGULAR`` times Poisson's, how regular a count is does not
    matter to a queue (and the model's own histogram bins add that much jitter)."""
    n, s1, s2 = mom[..., 0], mom[..., 1], mom[..., 2]
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = s1 / n
        var = np.maximum(s2 / n - mean * mean, REGULAR * mean)
        out: F64 = np.where(n >= 2.0, np.log((var + 1.0) / (mean + 1.0)), np.nan)
    return out


def _score(obs: F64, null: F64) -> Dependence | None:
    """The test from moments: measured ``(2S, 3)`` against replications ``(r, 2S, 3)``.

    Scored: the dispersion at every scale, and the cluster sizes at one scale, the finest
    whose blocks hold at least CLUSTER_ITEMS on average: clusters of finer blocks split
    wherever one gap is longer than a block, which for steady sources says more about where
    the sub-window edges fall than about the source."""
    ns = obs.shape[0] // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        per_block = obs[:ns, 1] / obs[:ns, 0]
    dense = np.flatnonzero(per_block >= CLUSTER_ITEMS)
    use = np.zeros(2 * ns, dtype=bool)
    use[:ns] = True
    if dense.size:
        use[ns + int(dense[0])] = True
    lo, ln = _log_dispersion(obs), _log_dispersion(null)
    r = null.shape[0]
    ok = use & np.isfinite(lo) & (np.sum(np.isfinite(ln), axis=0) >= r - 1)
    if r < 3 or not bool(ok.any()):
        return None
    lo, ln = lo[ok], ln[:, ok]
    fin = np.isfinite(ln)
    x = np.where(fin, ln, 0.0)
    cnt, tot, tot2 = fin.sum(axis=0), x.sum(axis=0), (x * x).sum(axis=0)

    def spread(c: F64, t: F64, t2: F64) -> tuple[F64, F64]:
        mu = t / c
        var = np.maximum(t2 - c * mu * mu, 0.0) / np.maximum(c - 1.0, 1.0)
        return mu, np.maximum(np.sqrt(var), MIN_SPREAD)

    mu, sd = spread(cnt.astype(np.float64), tot, tot2)
    t_obs = float(np.max(np.maximum(np.abs(lo - mu) - MIN_EFFECT, 0.0) / sd))
    # each replication against the others (leave one out)
    mu_l, sd_l = spread((cnt - fin).astype(np.float64), tot - x, tot2 - x * x)
    z = np.where(fin, np.maximum(np.abs(ln - mu_l) - MIN_EFFECT, 0.0) / sd_l, 0.0)
    t_null = z.max(axis=1)
    p = (1.0 + float(np.sum(t_null >= t_obs))) / (r + 1.0)
    return Dependence(t_obs, p, int(ok.sum()), r)


@dataclass(slots=True)
class DependencePool:
    """Frames' dependence tests pooled: their moments summed (the measured ones, and each
    replication index's over frames: one draw of the pooled null), then scored once. Power
    where each frame alone has little (e.g. one burst per frame: its size cannot be told
    from a geometric one's, but ten bursts of one size can)."""

    obs: F64 | None = None
    null: F64 | None = None
    frames: int = 0

    def add(self, obs: F64, null: F64) -> None:
        if self.obs is None or self.null is None:
            self.obs, self.null = obs.copy(), null.copy()
        elif self.obs.shape == obs.shape and self.null.shape == null.shape:
            self.obs += obs
            self.null += null
        else:
            return  # another grid of scales or replications: not poolable
        self.frames += 1

    def result(self) -> Dependence | None:
        if self.obs is None or self.null is None:
            return None
        return _score(self.obs, self.null)


def dependence_test(
    inter_insert: HistogramLike,
    profile: Profile,
    frame_ns: float,
    rng: np.random.Generator,
    *,
    null_replications: int = 99,
    residual: bool = True,
    pool: DependencePool | None = None,
) -> Dependence | None:
    """Are the frame's insertions a renewal process with gaps from ``inter_insert``?

    The measured ``profile`` (its sub-windows inside ``[0, frame_ns)``) against
    ``null_replications`` renewal replications (:func:`renewal_profiles`), on the dispersion
    (log of (variance + 1) / (mean + 1)) of the insertions per block of 1, 2, 4, ...
    sub-windows and of the cluster sizes (items per maximal run of non-empty sub-windows).
    Each figure is standardised by the replications' mean and spread; the statistic is the
    largest ``|z|``, its p-value the share of replications (each scored against the others)
    at least as extreme. Bursts, lulls and rate changes longer than a sub-window show as too
    much dispersion at some scale; bursts of a steady size or period as too little. ``pool``:
    also add this frame's moments to it. None when the frame covers fewer than
    ``2 * MIN_BLOCKS`` sub-windows or nothing could be scored.
    """
    counts, width = _profile(profile)
    k = min(counts.size, int(frame_ns / width + 1e-9))
    if k < 2 * MIN_BLOCKS:
        return None
    scales = _scales(counts.size)  # fixed per grid, so that frames pool
    null = _moments(
        renewal_profiles(inter_insert, width, k, rng, null_replications, residual=residual),
        scales,
    )
    obs = _moments(counts[:k], scales)[0]
    if pool is not None:
        pool.add(obs, null)
    return _score(obs, null)


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
    _check_alpha(alpha)
    if null_replications < 1 or not clock_bias_items >= 0.0:
        raise ModelInputError("need null_replications >= 1 and clock_bias_items >= 0")
    if arrivals not in ("renewal", "profile"):
        raise ModelInputError(f"arrivals must be 'renewal' or 'profile', got {arrivals!r}")
    if arrivals == "profile" and profile is None:
        raise ModelInputError("the 'profile' arrivals need the frame's insertion profile")
    sampled = profile if arrivals == "profile" else None
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
        return _verdict(w1, tv_max, _loo_null(runs), level, clock_bias_items, dep)
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
            profile=sampled,
            windows=windows,
        )
    w1, tv_max = _stat(measured_tail, measured_head, pred)
    runs = replicates(
        inter_insert, inter_depart, frame_ns, model, bus, rng, null_replications,
        start_tail=start_tail, start_head=start_head, profile=sampled, windows=windows,
    )  # fmt: skip
    null = np.array([_stat(occ.tail, occ.head, pred)[0] for occ, _ in runs])
    return _verdict(w1, tv_max, null, level, clock_bias_items, dep)


def _verdict(
    w1: float, tv_max: float, null: F64, level: float, bias: float, dep: Dependence | None
) -> FrameVerdict:
    q = float(np.quantile(null, 1.0 - level, method="higher"))
    threshold = q + bias
    bad = w1 > threshold or (dep is not None and dep.p_value < level)
    return FrameVerdict(
        verdict="rejected" if bad else "consistent",
        w1_items=w1,
        tv=tv_max,
        threshold_items=threshold,
        clock_bias_items=bias,
        null_quantile_items=q,
        null_replications=int(null.size),
        dependence=dep,
    )


def _loo_null(runs: Sequence[tuple[SubQueues, int]]) -> F64:
    """W1(tail) + W1(head) of each replication against the mean of the others."""

    def fractions(rows: list[F64]) -> F64:
        width = max(r.size for r in rows)
        out: F64 = np.stack([np.pad(r / r.sum(), (0, width - r.size)) for r in rows])
        return out

    n = len(runs)
    total = np.zeros(n)
    for side in (fractions([o.tail for o, _ in runs]), fractions([o.head for o, _ in runs])):
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
    )
