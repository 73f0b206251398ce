"""The renewal model's dependence test: a frame's insertion profile (insertions per sub-window)
and inter-insertion histogram in; whether its insertions look like i.i.d. gaps (statistic and
Monte Carlo p-value) out, per frame or pooled over frames."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.model._inputs import F64
from streamscope.model.recursions import KERNELS
from streamscope.model.sampling import (
    HistogramLike,
    Profile,
    as_profile,
    histogram,
    renewal_draws,
    renewal_gaps,
)

__all__ = [
    "CLUSTER_ITEMS",
    "MIN_BLOCKS",
    "MIN_EFFECT",
    "MIN_SPREAD",
    "REGULAR",
    "Dependence",
    "DependencePool",
    "dependence_test",
    "renewal_profiles",
    "window_counts_py",
]

#: The compiled counts (None where the extension was not built, or was built before they were).
WINDOW_COUNTS = getattr(KERNELS, "window_counts", None)

# Why a second test: the self-check's W1 test has little power against bursty sources, since its
# threshold comes from replications of the same model, and for bursty sources those spread as
# widely as the bursts they put at random places. This one tests what the renewal model assumes:
# the profile's dispersion at every scale against the renewal replications'.

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
    inter_insert = histogram(inter_insert, "inter_insert")
    m = renewal_draws(inter_insert, span)
    for r in range(n):
        gaps = renewal_gaps(inter_insert, span, m, rng, residual=residual)
        # compiled: the running sums, the cut and the counts in one pass over the gaps
        if WINDOW_COUNTS is None or WINDOW_COUNTS(gaps, span, width_ns, out[r]) < 0:
            out[r] = window_counts_py(gaps, span, width_ns, sub_windows)
    return out


def window_counts_py(
    gaps: F64, span_ns: float, width_ns: float, sub_windows: int
) -> NDArray[np.int64]:
    """Insertions per sub-window of ``width_ns`` (``sub_windows`` of them) for insertions at
    the running sums of ``gaps`` (ns), those before ``span_ns``: the compiled
    ``window_counts``' reference, and what runs where it was not built."""
    t = np.cumsum(gaps)
    t = t[t < span_ns]
    sub = (t // width_ns).astype(np.int64)
    out: NDArray[np.int64] = np.bincount(sub, minlength=sub_windows)[:sub_windows]
    return out


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


def _spread(c: F64, t: F64, t2: F64) -> tuple[F64, F64]:
    """Mean and (floored) standard deviation from count, sum and sum of squares."""
    mu = t / c
    var = np.maximum(t2 - c * mu * mu, 0.0) / np.maximum(c - 1.0, 1.0)
    return mu, np.maximum(np.sqrt(var), MIN_SPREAD)


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

    mu, sd = _spread(cnt.astype(np.float64), tot, tot2)
    t_obs = float(np.max(np.maximum(np.abs(lo - mu) - MIN_EFFECT, 0.0) / sd))
    # each replication against the others (leave one out)
    mu_l, sd_l = _spread((cnt - fin).astype(np.float64), tot - x, tot2 - x * x)
    z = np.where(fin, np.maximum(np.abs(ln - mu_l) - MIN_EFFECT, 0.0) / sd_l, 0.0)
    t_null = z.max(axis=1)
    p = (1.0 + float(np.sum(t_null >= t_obs))) / (r + 1.0)
    return Dependence(t_obs, p, int(ok.sum()), r)


@dataclass(slots=True)
class DependencePool:
    """Frames' dependence tests pooled: their moments summed (the measured ones, and each
    replication index's over frames: one draw of the pooled null), then scored once. Power
    where each frame alone has little (e.g. one burst per frame: its size cannot be told
    from a geometric one's, but ten bursts of one size can).

    Mutable on purpose: it is filled frame by frame as the frames are checked (each
    :func:`dependence_test` given it adds that frame's moments), then scored once."""

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
    counts, width = as_profile(profile)
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
