"""Time-weighted occupancy of a queue: per-customer arrival and departure times (ns) in,
ns spent at each level over a window out; plus W1 and total-variation distances between levels.
"""

from __future__ import annotations

from typing import TypeGuard

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.model._inputs import F64, ModelInputError, as_times
from streamscope.model.recursions import KERNELS

I64 = NDArray[np.int64]

__all__ = ["occupancy_from_events", "occupancy_py", "tv", "w1_items"]

#: The compiled merge (None where the extension was not built, or was built before it was).
OCCUPANCY_SORTED = getattr(KERNELS, "occupancy_sorted", None)


def occupancy_from_events(
    arrive_ns: ArrayLike, depart_ns: ArrayLike, t0: float, t1: float
) -> tuple[I64, F64]:
    """ns the queue held each level over ``[t0, t1)``: ``(levels, ns_at_level)``.

    Customer ``k`` is in the queue over ``[arrive_ns[k], depart_ns[k])``; the queue is taken to
    hold nobody else (customers present before ``t0`` must be among those passed).
    ``levels`` is ``0..max`` (max: the highest level held for a positive time) and
    ``ns_at_level.sum() == t1 - t0`` (to float rounding).
    """
    if OCCUPANCY_SORTED is not None and _ordered_f64(arrive_ns) and _ordered_f64(depart_ns):
        # The model's queues are FIFO: arrivals and departures each come in order, so the
        # events' sort is a merge, compiled (the same sums in the same order); -1 where the
        # inputs are not of that kind, which the general path below then handles.
        n = arrive_ns.size
        if depart_ns.size == n:
            ns = np.empty(n + 1)
            keep = OCCUPANCY_SORTED(arrive_ns, depart_ns, float(t0), float(t1), ns)
            if keep > 0:
                return np.arange(keep, dtype=np.int64), ns[:keep].copy()  # not n + 1 held
    return occupancy_py(arrive_ns, depart_ns, t0, t1)


def _ordered_f64(x: ArrayLike) -> TypeGuard[F64]:
    """Whether ``x`` can go to the compiled merge as it is (a contiguous 1-D float64 array)."""
    return (
        isinstance(x, np.ndarray)
        and x.dtype == np.float64
        and x.ndim == 1
        and bool(x.flags.c_contiguous)
    )


def occupancy_py(
    arrive_ns: ArrayLike, depart_ns: ArrayLike, t0: float, t1: float
) -> tuple[I64, F64]:
    """:func:`occupancy_from_events` by a stable sort of the events: any order of arrivals and
    departures, the errors it reports, and the compiled merge's reference."""
    a = as_times("arrive_ns", arrive_ns)
    d = as_times("depart_ns", depart_ns)
    if a.shape != d.shape:
        raise ModelInputError(f"arrive_ns and depart_ns differ in length: {a.size} vs {d.size}")
    # Times built from different cumulative sums may disagree by a few ulps; only a real
    # negative stay is an error, a rounding one is read as zero.
    bad = d < a - 1e-12 * np.maximum(1.0, np.abs(a))
    if bool(bad.any()):
        k = int(np.argmax(bad))
        raise ModelInputError(f"customer {k} departs ({d[k]}) before it arrives ({a[k]})")
    d = np.maximum(d, a)
    if not t1 >= t0:
        raise ModelInputError(f"window must have t1 >= t0, got [{t0}, {t1})")
    # Clipping to the window turns out-of-window stays into zero-width ones (no weight).
    a = np.clip(a, t0, t1)
    d = np.clip(d, t0, t1)
    times = np.concatenate(([t0], a, d))
    step = np.concatenate(([0], np.ones(a.size, np.int64), -np.ones(d.size, np.int64)))
    # Stable sort keeps arrivals before departures at equal times, so no prefix goes negative.
    order = np.argsort(times, kind="stable")
    times = times[order]
    level = np.cumsum(step[order])
    dur = np.diff(np.append(times, t1))
    ns = np.bincount(level, weights=dur).astype(np.float64)
    # Tied events (e.g. every stay clipped to t0) can spike the level for zero ns: drop the
    # zero-weight levels above the highest level actually held.
    held = np.flatnonzero(ns > 0.0)
    ns = ns[: int(held[-1]) + 1] if held.size else ns[:1]
    return np.arange(ns.size, dtype=np.int64), ns


def _normalised_pair(p: ArrayLike, q: ArrayLike) -> tuple[F64, F64]:
    pa = _padded(np.asarray(p, dtype=np.float64), np.asarray(q).size)
    qa = _padded(np.asarray(q, dtype=np.float64), pa.size)
    sp, sq = float(pa.sum()), float(qa.sum())
    if sp <= 0.0 or sq <= 0.0:
        raise ModelInputError("a level distribution must have positive total weight")
    return pa / sp, qa / sq


def _padded(x: F64, n: int) -> F64:
    """``x`` (1-D) followed by zeros up to ``n`` entries, as ``np.pad(x, (0, n - x.size))``
    gives it (a copy), at a fraction of its cost: a frame's conditioning takes some 80."""
    n = max(n, x.size)
    if x.ndim != 1:
        padded: F64 = np.pad(x, (0, n - x.size))
        return padded
    out: F64 = np.zeros(n)
    out[: x.size] = x
    return out


def w1_items(p: ArrayLike, q: ArrayLike) -> float:
    """Wasserstein-1 (in items) between two weightings of levels ``0, 1, 2, ...``, each normalised."""
    pa, qa = _normalised_pair(p, q)
    return float(np.abs(np.cumsum(pa) - np.cumsum(qa)).sum())


def tv(p: ArrayLike, q: ArrayLike) -> float:
    """Total-variation distance (0..1) between two weightings of levels ``0, 1, 2, ...``."""
    pa, qa = _normalised_pair(p, q)
    return 0.5 * float(np.abs(pa - qa).sum())
