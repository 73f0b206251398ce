"""Clock steps: a run's burst fits in, the burst ranges between detected steps (segments) out.

A step is declared only where no clock whose rate drifts within the stated allowance can meet the
round trips of neighbouring bursts, so a steady clock is never split.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from streamscope.timebase.burst import Fit
from streamscope.timebase.hull import Region, region

F64 = NDArray[np.float64]
#: Rounding slack (ns) added to every constraint before declaring that no clock fits.
STEP_TOL_NS = 1e-3


def binding_points(f: Fit) -> tuple[F64, F64, F64, F64]:
    """The round trips that bound a feasible fit's polygon, recovered from its edges.

    Vertices are stored lower chain (rising slope) then upper chain (falling); the lines along
    one edge all pass through one constraint point, at d = -(db2 - db1) / (ds2 - ds1) ticks from
    x0 and y = b1 + s1 * d ns from b_ns. Returns (lower d, lower y, upper d, upper y).
    """
    ds, db = np.asarray(f.region_ds_ns_per_tick), np.asarray(f.region_db_ns)
    step_s = np.roll(ds, -1) - ds
    # an edge too short in slope to place its point precisely is dropped: fewer constraints
    # can only make bursts look more consistent, never invent a step
    ok = np.abs(step_s) > 1e-12 * max(abs(f.s_ns_per_tick), 1e-300)
    d = -(np.roll(db, -1) - db)[ok] / step_s[ok]
    y = db[ok] + (ds[ok] + f.s_ns_per_tick) * d
    rising = step_s[ok] > 0
    return d[rising], y[rising], d[~rising], y[~rising]


@lru_cache(maxsize=4096)
def joint(
    fits: tuple[Fit, ...], drift_ppb_per_s: float, kink_ppm: float = 0.0
) -> tuple[int, float, Region] | None:
    """The lines a clock drifting at most ``drift_ppb_per_s`` allows as its tangent at x_m, the
    middle of the bursts: (x_m, b_m, region), the region's offsets in ns relative to b_m.

    Such a clock g (|g''| <= k, k = drift in ns per tick**2) has a tangent at x_m that meets
    every round trip loosened by k*(x - x_m)**2/2, so the region of the bursts' binding points
    so loosened holds it. ``kink_ppm`` allows besides one change of rate of up to that much
    anywhere: a line of the rate on x_m's side meets the clock at x_m and strays from it by at
    most the change times |x - x_m|, so every round trip is loosened by that too. None when too
    few points pin a line. Cached: a model rebuilt after each burst asks the same questions
    again.
    """
    x_m = (fits[0].x0_ticks + fits[-1].x0_ticks) // 2
    b_m = fits[0].b_ns
    s = max(abs(f.s_ns_per_tick) for f in fits)
    kappa = drift_ppb_per_s * 1e-18 * s * s
    tilt = kink_ppm * 1e-6 * s
    parts: list[list[F64]] = [[], [], [], []]
    for f in fits:  # a handful of bursts per question
        shift_x = float(f.x0_ticks - x_m)
        for i, arr in enumerate(binding_points(f)):
            parts[i].append(arr + (shift_x if i % 2 == 0 else f.b_ns - b_m))
    u, lo, v, hi = (np.concatenate(p) for p in parts)
    if not _bounded(u, v):
        return None
    lo = lo - 0.5 * kappa * u * u - tilt * np.abs(u) - STEP_TOL_NS
    hi = hi + 0.5 * kappa * v * v + tilt * np.abs(v) + STEP_TOL_NS
    return x_m, b_m, region(u, lo, v, hi)


def consistent(fits: tuple[Fit, ...], drift_ppb_per_s: float) -> bool:
    """Whether one clock whose rate drifts at most ``drift_ppb_per_s`` meets every burst."""
    j = joint(fits, drift_ppb_per_s)
    return j is None or j[2].feasible


def _bounded(u: F64, v: F64) -> bool:
    """``region`` needs each side at two positions and the two sides interleaved."""
    return (
        np.unique(u).size >= 2
        and np.unique(v).size >= 2
        and bool(u.max() > v.min())
        and bool(v.max() > u.min())
    )


def segments(fits: Sequence[Fit], drift_ppb_per_s: float) -> list[tuple[int, int]]:
    """Burst index ranges [start, stop) between steps.

    A burst starts a segment if it, or the burst before it, admits no line, or if the two cannot
    share one drifting clock. Two short bursts can always share one by a different rate, so
    triples are checked too: a greedy pass forward and one backward each split where the last
    three bursts of the segment they are growing disagree. A step in a gap shows in every
    triple around it; forward finds the gap or the one after, backward the gap or the one before,
    and splitting at both keeps bounds valid (a needless split only widens them).
    """
    n = len(fits)
    if n == 0:
        return []
    pair_split = {
        k
        for k in range(1, n)
        if not (
            fits[k - 1].feasible
            and fits[k].feasible
            and consistent((fits[k - 1], fits[k]), drift_ppb_per_s)
        )
    }
    split = set(pair_split)
    start = 0
    for k in range(1, n):  # per burst, not per event
        if k in pair_split:
            start = k
        elif k - start >= 2 and not consistent(tuple(fits[k - 2 : k + 1]), drift_ppb_per_s):
            split.add(k)
            start = k
    end = n - 1
    for k in range(n - 2, -1, -1):
        if k + 1 in pair_split:
            end = k
        elif end - k >= 2 and not consistent(tuple(fits[k : k + 3]), drift_ppb_per_s):
            split.add(k + 1)
            end = k
    starts = sorted({0, *split})
    return list(zip(starts, [*starts[1:], n], strict=True))


def needs_step(
    fits: Sequence[Fit],
    segments: Sequence[tuple[int, int]],
    drift_ppb_per_s: float,
    max_rate_change_ppm: float,
) -> list[bool]:
    """Per split between neighbouring segments: whether only a step in the split's own gap
    explains it. With bursts z, a before it and b, c after, no clock drifting within the
    allowance and changing its rate once by at most ``max_rate_change_ppm`` meets z, a, b, c
    (a step among them), nor a, b, c (it is not in z–a), nor z, a, b (nor in b–c). A side with
    fewer than two feasible bursts pins no rate, so its split may be either (False)."""
    out = []
    for (a0, a1), (b0, b1) in itertools.pairwise(segments):
        before = tuple(f for f in fits[a0:a1] if f.feasible)[-2:]
        after = tuple(f for f in fits[b0:b1] if f.feasible)[:2]
        if len(before) < 2 or len(after) < 2:
            out.append(False)
            continue
        out.append(
            not any(
                _kinked(group, drift_ppb_per_s, max_rate_change_ppm)
                for group in (before + after, before[1:] + after, before + after[:1])
            )
        )
    return out


def _kinked(fits: tuple[Fit, ...], drift_ppb_per_s: float, kink_ppm: float) -> bool:
    """Whether one drifting clock with one change of rate of at most ``kink_ppm`` may meet
    every burst (also when too few points pin a line to tell)."""
    j = joint(fits, drift_ppb_per_s, kink_ppm)
    return j is None or j[2].feasible
