"""Draws from what a frame measured: a gap histogram (ns; counts) and, where the producer's side
measured it, its insertion profile (insertions per sub-window) in; gaps and insertion times (ns)
out, for the estimator's replications and the self-check's null.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.aggregate.points import HistogramPoint
from streamscope.core.numeric import dot
from streamscope.model._inputs import F64, ModelInputError
from streamscope.model.recursions import KERNELS

__all__ = [
    "Histogram",
    "HistogramLike",
    "Profile",
    "as_histogram",
    "as_profile",
    "histogram",
    "histogram_draws_py",
    "mean_gap",
    "renewal_draws",
    "renewal_gaps",
    "sample_histogram",
    "sample_profile",
    "sample_residual",
    "uniforms",
]


@dataclass(frozen=True, slots=True, eq=False)
class Histogram:
    """A gap histogram checked once (:func:`histogram`), with what drawing from it takes,
    computed once rather than per draw: edges (ns), weights and their running sum; for the
    residual, each bin's weight times its midpoint, running, and their total; the mean gap
    (ns, each bin at its midpoint)."""

    edges: F64
    weights: F64
    cdf: F64
    length_cdf: F64
    length_total: float
    mean_ns: float


HistogramLike = HistogramPoint | Histogram | tuple[ArrayLike, ArrayLike]

#: This module's compiled loops (None where the extension was not built, or was built before
#: they were): the draws' bins, and a profile's insertion times.
HISTOGRAM_DRAWS = getattr(KERNELS, "histogram_draws", None)
PROFILE_TIMES = getattr(KERNELS, "profile_times", None)
#: numpy's PCG64 uniforms, compiled (None where not built): see :func:`uniforms`; and the
#: histogram draws from them, without holding them (see :func:`sample_histogram`).
PCG64_DOUBLES = getattr(KERNELS, "pcg64_doubles", None)
PCG64_HISTOGRAM_DRAWS = getattr(KERNELS, "pcg64_histogram_draws", None)
_LOW64 = (1 << 64) - 1


class Profile(NamedTuple):
    """Insertions measured in consecutive sub-windows of a frame: ``counts[i]`` items in
    ``[i * width_ns, (i + 1) * width_ns)`` from the frame start."""

    counts: ArrayLike
    width_ns: float


def as_histogram(h: HistogramLike, name: str) -> tuple[F64, F64]:
    """``(edges, weights)`` of a histogram fit to sample, or a ModelInputError naming ``name``."""
    if isinstance(h, Histogram):
        return h.edges, h.weights
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


def histogram(h: HistogramLike, name: str) -> Histogram:
    """``h`` checked (:func:`as_histogram`) and made ready to draw from, once for the many
    draws of a frame's replications; a :class:`Histogram` comes back as it is."""
    if isinstance(h, Histogram):
        return h
    return _ready(*as_histogram(h, name))


def _ready(e: F64, w: F64) -> Histogram:
    """A :class:`Histogram` of edges and weights already checked."""
    lw = w * 0.5 * (e[:-1] + e[1:])
    mean = dot(0.5 * (e[:-1] + e[1:]), w) / float(w.sum())
    return Histogram(e, w, np.cumsum(w), np.cumsum(lw), float(lw.sum()), mean)


def as_profile(p: Profile) -> tuple[NDArray[np.int64], float]:
    """``(counts, width_ns)`` of a profile, or a ModelInputError."""
    c = np.asarray(p.counts)
    w = float(p.width_ns)
    if c.ndim != 1 or c.size == 0 or c.dtype.kind not in "iu" or bool(np.any(c < 0)):
        raise ModelInputError("profile: counts must be a non-empty 1-D array of integers >= 0")
    if not (math.isfinite(w) and w > 0.0):
        raise ModelInputError(f"profile: width_ns must be finite and > 0, got {p.width_ns}")
    return c.astype(np.int64), w


def mean_gap(h: HistogramLike) -> float:
    """Mean inter-insertion gap (ns) of ``h`` (each bin at its midpoint), or a ModelInputError."""
    mean = histogram(h, "inter_insert").mean_ns
    if not mean > 0.0:
        raise ModelInputError("inter_insert: mean inter-insertion time must be > 0 ns")
    return mean


def sample_histogram(h: HistogramLike, n: int, rng: np.random.Generator) -> F64:
    """``n`` draws (ns): a bin with probability proportional to its weight, then uniform within it.

    Only the weights inside the edges are used (a HistogramPoint's ``under``/``over`` are ignored).
    """
    c = histogram(h, "histogram")
    e, cdf = c.edges, c.cdf
    if PCG64_HISTOGRAM_DRAWS is not None and n >= 64:
        # The uniforms below and their draws in one compiled pass (numpy's PCG64 alone).
        out = np.empty(n)
        ec, cc = np.ascontiguousarray(e), np.ascontiguousarray(cdf)
        if _drawn_from_state(rng, lambda *state: PCG64_HISTOGRAM_DRAWS(*state, ec, cc, out)):
            return out
    uv = uniforms(rng, 2 * n)  # as rng.random(n) twice
    u = uv[:n]  # which bin
    v = uv[n:]  # where inside it
    # Compiled (the same operations, a guide table in place of the bisection): the draws of
    # every replication and of the dependence test's null go through here.
    if HISTOGRAM_DRAWS is None or not HISTOGRAM_DRAWS(
        np.ascontiguousarray(e), np.ascontiguousarray(cdf), u, v
    ):
        return histogram_draws_py(e, cdf, u, v)
    return u


def uniforms(rng: np.random.Generator, n: int) -> F64:
    """``rng.random(n)``, the same numbers, and ``rng`` left in the same state: for numpy's
    PCG64 (``default_rng``'s) drawn compiled (``PCG64_DOUBLES``: its steps four at a time)
    from its state, which is then set on; from ``rng`` itself for any other generator, or where
    the loop was not built. Drawing uniforms took a third of a replication's time."""
    if PCG64_DOUBLES is not None and n >= 64:
        out = np.empty(n)
        if _drawn_from_state(rng, lambda *state: PCG64_DOUBLES(*state, out)):
            return out
    return rng.random(n)


def _drawn_from_state(
    rng: np.random.Generator, draw: Callable[[int, int, int, int], tuple[int, int] | None]
) -> bool:
    """Whether ``draw`` drew from ``rng``'s PCG64 state: called with the state's and the
    increment's high and low 64 bits, it returns the state after its draws (set on ``rng``)
    or None (nothing drawn, ``rng`` untouched; so too for any other generator)."""
    bits = rng.bit_generator
    if type(bits) is not np.random.PCG64:
        return False
    with bits.lock:  # as numpy's own draws: no other draw between the state's read and write
        state = bits.state
        pcg = state["state"]
        x, inc = int(pcg["state"]), int(pcg["inc"])
        after = draw(x >> 64, x & _LOW64, inc >> 64, inc & _LOW64)
        if after is None:  # no 128-bit integers where it was built, or not drawn
            return False
        pcg["state"] = (after[0] << 64) | after[1]
        bits.state = state
    return True


def histogram_draws_py(e: F64, cdf: F64, u: F64, v: F64) -> F64:
    """:func:`sample_histogram` from its uniforms ``u`` (the bins) and ``v`` (inside them),
    edges ``e`` and cumulative weights ``cdf``: the compiled ``histogram_draws``' reference,
    and what runs where it was not built."""
    idx = np.searchsorted(cdf, u * cdf[-1], side="right")
    idx = np.minimum(idx, cdf.size - 1)
    out: F64 = e[idx] + v * (e[idx + 1] - e[idx])
    return out


def sample_residual(h: HistogramLike, rng: np.random.Generator) -> float:
    """One draw of the time from an arbitrary instant to the next insertion, for insertions
    whose gaps follow ``h`` (the renewal process's equilibrium residual): a gap drawn in
    proportion to its length, then a uniform point inside it. A frame starts at an arbitrary
    instant, so its first insertion comes after a residual, not after a whole gap (for
    exponential gaps the two agree; for gaps longer than the frame only the residual lets an
    insertion fall inside it)."""
    c = histogram(h, "histogram")
    e, total = c.edges, c.length_total
    lo, hi = e[:-1], e[1:]
    if total <= 0.0:
        return float(sample_histogram(c, 1, rng)[0])
    i = min(int(np.searchsorted(c.length_cdf, rng.random() * total, side="right")), lo.size - 1)
    # within the bin, density proportional to the gap's length
    gap = math.sqrt(lo[i] ** 2 + rng.random() * (hi[i] ** 2 - lo[i] ** 2))
    return float(rng.random() * gap)


def renewal_draws(h: HistogramLike, span_ns: float) -> int:
    """How many gaps :func:`renewal_gaps` draws at a time for ``span_ns``: the expected number
    plus six standard deviations of a Poisson count, so that a top-up is rare."""
    expect = span_ns / mean_gap(h)
    return int(expect + 6.0 * math.sqrt(expect) + 16.0)


def renewal_gaps(
    h: HistogramLike, span_ns: float, n: int, rng: np.random.Generator, *, residual: bool = True
) -> F64:
    """Gaps (ns) drawn i.i.d. from ``h``, ``n`` at a time (:func:`renewal_draws`), until they sum
    to at least ``span_ns``: the renewal model of the insertions. The first is a residual
    (:func:`sample_residual`: the span starts at an arbitrary instant), or, with
    ``residual=False``, a whole gap."""
    gaps = sample_histogram(h, n, rng)
    if residual:
        gaps[0] = sample_residual(h, rng)
    while float(gaps.sum()) < span_ns:  # rare: top up until the span is covered
        gaps = np.concatenate((gaps, sample_histogram(h, n, rng)))
    return gaps


def sample_profile(h: HistogramLike, profile: Profile, rng: np.random.Generator) -> F64:
    """Insertion times (ns, sorted) with exactly ``profile.counts[i]`` in sub-window ``i``.

    In a sub-window holding ``c`` items, ``c + 1`` gaps are drawn from ``h`` and scaled to fill
    it; the items sit at the first ``c`` cumulative sums (for exponential gaps: ``c`` uniform
    points, the Poisson process given its count; for constant gaps: evenly spaced). Only gaps
    shorter than a sub-window are drawn when ``h`` has any: longer ones are what the profile's
    empty sub-windows already show.
    """
    counts, width = as_profile(profile)
    hist = histogram(h, "histogram")
    e, w = hist.edges, hist.weights
    short = e[1:] <= width
    # every bin short (as a frame's gaps usually are): hist is what _ready would make again
    if not bool(short.all()) and bool(np.any(w[short] > 0.0)):
        hist = _ready(e[: int(np.flatnonzero(short)[-1]) + 2], w[short])
    busy = np.flatnonzero(counts)
    if busy.size == 0:
        return np.zeros(0)
    c = counts[busy]
    draws = sample_histogram(hist, int(c.sum()) + busy.size, rng)
    first = np.concatenate(([0], np.cumsum(c + 1)[:-1]))
    total = np.add.reduceat(draws, first)
    if PROFILE_TIMES is None:
        return profile_times_py(draws, c, busy, total, first, width)
    out = np.empty(int(c.sum()))
    PROFILE_TIMES(draws, c, busy, total, width, out)
    return out


def profile_times_py(
    draws: F64,
    c: NDArray[np.int64],
    busy: NDArray[np.int64],
    total: F64,
    first: NDArray[np.int64],
    width: float,
) -> F64:
    """:func:`sample_profile`'s insertion times from its ``draws``: ``c[q] + 1`` of them for
    busy sub-window ``busy[q]`` (from ``first[q]``), summing to ``total[q]``; the compiled
    ``profile_times``' reference, and what runs where it was not built."""
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
