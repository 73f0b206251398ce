"""Feasible lines: points a line must pass above and points it must pass below in, out the convex
polygon of those lines in (slope, offset), its slope interval and its widest-corridor line (the
point estimate; the least-violating line where no line fits).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
IDX = NDArray[np.intp]

#: Vectorised pruning passes before the monotone chain finishes the hull (see ``upper_hull``).
_PRUNE_PASSES = 6


@dataclass(frozen=True, slots=True)
class Region:
    """Every line ``y = s * x + b`` (x centred) that satisfies all constraints.

    ``width`` is the vertical gap between the two hulls at ``s_est``: >= 0 when the constraints
    are feasible, otherwise minus the overlap the least-violating line cannot avoid.
    ``vert_s``/``vert_b`` are the polygon's vertices (empty when infeasible), in order: the lower
    chain (rising slope, offsets on g) then the upper chain (falling slope, offsets on h), so each
    edge is one point's constraint; ``support_*`` are the indices of the lower and upper points
    whose constraints bound the polygon.
    """

    s_est: float
    b_est: float
    width: float
    s_lo: float
    s_hi: float
    vert_s: F64
    vert_b: F64
    support_lower: IDX
    support_upper: IDX

    @property
    def feasible(self) -> bool:
        return self.width >= 0.0


def upper_hull(x: F64, y: F64) -> IDX:
    """Indices of the upper convex hull of points with strictly increasing ``x``, left to right.

    A point on or below the chord of its two neighbours is never a hull vertex, whatever else is
    removed, so a few vectorised passes drop all such points at once (most of them, on calibration
    data); a monotone chain over the survivors guarantees O(n) after the sort in the worst case.
    """
    idx = np.arange(x.size)
    for _ in range(_PRUNE_PASSES):
        if idx.size < 3:
            return idx
        xi, yi = x[idx], y[idx]
        dx1, dy1 = xi[1:-1] - xi[:-2], yi[1:-1] - yi[:-2]
        dx2, dy2 = xi[2:] - xi[:-2], yi[2:] - yi[:-2]
        below = dy1 * dx2 <= dy2 * dx1
        if not below.any():
            return idx
        keep = np.ones(idx.size, dtype=bool)
        keep[1:-1] = ~below
        idx = idx[keep]
    xs, ys = x[idx].tolist(), y[idx].tolist()
    chain: list[int] = []
    # Per-point loop: the chain's pops depend on earlier pops, which numpy cannot express; it only
    # runs over the few points the vectorised passes left.
    for k in range(len(xs)):
        while len(chain) >= 2:
            i, j = chain[-2], chain[-1]
            if (ys[j] - ys[i]) * (xs[k] - xs[i]) <= (ys[k] - ys[i]) * (xs[j] - xs[i]):
                chain.pop()
            else:
                break
        chain.append(k)
    return idx[np.asarray(chain, dtype=np.intp)]


def _dedupe(x: F64, y: F64, keep_max: bool) -> IDX:
    """Indices sorting points by x, one per distinct x: the highest (or lowest) y there."""
    order = np.lexsort((y, x)) if keep_max else np.lexsort((-y, x))
    xs = x[order]
    last = np.ones(xs.size, dtype=bool)
    last[:-1] = xs[1:] != xs[:-1]
    return order[last]


def region(u: F64, lo: F64, v: F64, hi: F64) -> Region:
    """The feasible polygon of lines above every (u, lo) and below every (v, hi).

    g(s) = max(lo - s*u) and h(s) = min(hi - s*v) bound the offset at slope s; their breakpoints
    are the edge slopes of the upper hull of the lower points and the lower hull of the upper
    points. D(s) = h(s) - g(s) is concave and piecewise linear, so the polygon is where D >= 0,
    found from D at the breakpoints. Needs both point sets to span at least two positions with
    ``max(u) > min(v)`` and ``max(v) > min(u)`` (otherwise the slope is unbounded).
    """
    ia = _dedupe(u, lo, keep_max=True)
    ia = ia[upper_hull(u[ia], lo[ia])]
    ib = _dedupe(v, -hi, keep_max=True)  # the lowest hi per position
    ib = ib[upper_hull(v[ib], -hi[ib])]  # lower hull of (v, hi)
    au, al, bv, bh = u[ia], lo[ia], v[ib], hi[ib]
    sig = np.diff(al) / np.diff(au)  # decreasing: g's breakpoints
    tau = np.diff(bh) / np.diff(bv)  # increasing: h's breakpoints
    sig_rev = sig[::-1]

    def g_at(s: F64) -> tuple[F64, IDX]:
        j = sig.size - np.searchsorted(sig_rev, s, side="right")
        return al[j] - s * au[j], j

    def h_at(s: F64) -> tuple[F64, IDX]:
        j = np.searchsorted(tau, s, side="left")
        return bh[j] - s * bv[j], j

    brk = np.unique(np.concatenate([sig, tau]))
    d = h_at(brk)[0] - g_at(brk)[0]
    top = np.flatnonzero(d == d.max())
    # D is linear between breakpoints, so its maximum is at one (a flat top: take its middle).
    k = int(top[0])
    s_est = float(0.5 * (brk[top[0]] + brk[top[-1]]))
    width = float(d[k])
    se = np.array([s_est])
    g_e, h_e = float(g_at(se)[0][0]), float(h_at(se)[0][0])
    b_est = 0.5 * (g_e + h_e)
    if width < 0.0:
        empty = np.empty(0, dtype=np.float64)
        sup_a = ia[g_at(se)[1]]
        sup_b = ib[h_at(se)[1]]
        return Region(s_est, b_est, width, s_est, s_est, empty, empty, sup_a, sup_b)

    s_lo = _root(brk[: k + 1], d[: k + 1], slope_out=float(au[-1] - bv[0]), left=True)
    s_hi = _root(brk[k:], d[k:], slope_out=float(au[0] - bv[-1]), left=False)
    inner_sig = sig[(sig > s_lo) & (sig < s_hi)][::-1]
    inner_tau = tau[(tau > s_lo) & (tau < s_hi)][::-1]
    low_s = np.concatenate([[s_lo], inner_sig, [s_hi]])
    up_s = np.concatenate([[s_hi], inner_tau, [s_lo]])
    g_low = g_at(low_s)[0]
    h_up = h_at(up_s)[0]
    # each polygon edge is one point's constraint: the one binding between its two end vertices
    ja = g_at(0.5 * (low_s[1:] + low_s[:-1]))[1]
    jb = h_at(0.5 * (up_s[1:] + up_s[:-1]))[1]
    return Region(
        s_est=s_est,
        b_est=b_est,
        width=width,
        s_lo=s_lo,
        s_hi=s_hi,
        vert_s=np.concatenate([low_s, up_s]),
        vert_b=np.concatenate([g_low, h_up]),
        support_lower=np.unique(ia[ja]),
        support_upper=np.unique(ib[jb]),
    )


def _root(s: F64, d: F64, *, slope_out: float, left: bool) -> float:
    """Where D crosses zero on one side of its maximum (``s``/``d`` ordered left to right).

    Beyond the outermost breakpoint D is linear with slope ``slope_out``; it is nonzero there
    because the points span at least two positions.
    """
    neg = np.flatnonzero(d < 0.0)
    if neg.size == 0:
        edge = 0 if left else -1
        return float(s[edge] - d[edge] / slope_out)
    i = int(neg[-1]) if left else int(neg[0]) - 1
    s0, s1, d0, d1 = s[i], s[i + 1], d[i], d[i + 1]
    return float(s0 + (0.0 - d0) * (s1 - s0) / (d1 - d0))
