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
    env = _Envelopes.of(u[ia], lo[ia], v[ib], hi[ib])
    brk = np.unique(np.concatenate([env.sig, env.tau]))
    d = env.h_at(brk)[0] - env.g_at(brk)[0]
    top = np.flatnonzero(d == d.max())
    # D is linear between breakpoints, so its maximum is at one (a flat top: take its middle).
    k = int(top[0])
    s_est = float(0.5 * (brk[top[0]] + brk[top[-1]]))
    width = float(d[k])
    se = np.array([s_est])
    g_e, h_e = float(env.g_at(se)[0][0]), float(env.h_at(se)[0][0])
    b_est = 0.5 * (g_e + h_e)
    if width < 0.0:
        empty = np.empty(0, dtype=np.float64)
        sup_a = ia[env.g_at(se)[1]]
        sup_b = ib[env.h_at(se)[1]]
        return Region(s_est, b_est, width, s_est, s_est, empty, empty, sup_a, sup_b)
    s_lo, s_hi, vert_s, vert_b, ja, jb = _polygon(env, brk, d, k)
    return Region(
        s_est=s_est,
        b_est=b_est,
        width=width,
        s_lo=s_lo,
        s_hi=s_hi,
        vert_s=vert_s,
        vert_b=vert_b,
        support_lower=np.unique(ia[ja]),
        support_upper=np.unique(ib[jb]),
    )


@dataclass(frozen=True, slots=True)
class _Envelopes:
    """g and h of ``region`` from the hulls' points: the lower points (``au``, ``al``) with g's
    breakpoints ``sig`` (decreasing), the upper points (``bv``, ``bh``) with h's ``tau``
    (increasing)."""

    au: F64
    al: F64
    bv: F64
    bh: F64
    sig: F64
    tau: F64
    sig_rev: F64

    @staticmethod
    def of(au: F64, al: F64, bv: F64, bh: F64) -> _Envelopes:
        sig = np.diff(al) / np.diff(au)
        tau = np.diff(bh) / np.diff(bv)
        return _Envelopes(au, al, bv, bh, sig, tau, sig[::-1])

    def g_at(self, s: F64) -> tuple[F64, IDX]:
        """g at slopes ``s``, and the lower point that attains it at each."""
        j = self.sig.size - np.searchsorted(self.sig_rev, s, side="right")
        return self.al[j] - s * self.au[j], j

    def h_at(self, s: F64) -> tuple[F64, IDX]:
        """h at slopes ``s``, and the upper point that attains it at each."""
        j = np.searchsorted(self.tau, s, side="left")
        return self.bh[j] - s * self.bv[j], j


def _polygon(env: _Envelopes, brk: F64, d: F64, k: int) -> tuple[float, float, F64, F64, IDX, IDX]:
    """The feasible polygon around D's maximum at breakpoint ``k``: its slope interval, its
    vertices' slopes and offsets (lower chain, then upper), and per edge of each chain the
    hull point whose constraint binds it."""
    s_lo = _root(brk[: k + 1], d[: k + 1], slope_out=float(env.au[-1] - env.bv[0]), left=True)
    s_hi = _root(brk[k:], d[k:], slope_out=float(env.au[0] - env.bv[-1]), left=False)
    inner_sig = env.sig[(env.sig > s_lo) & (env.sig < s_hi)][::-1]
    inner_tau = env.tau[(env.tau > s_lo) & (env.tau < s_hi)][::-1]
    low_s = np.concatenate([[s_lo], inner_sig, [s_hi]])
    up_s = np.concatenate([[s_hi], inner_tau, [s_lo]])
    g_low = env.g_at(low_s)[0]
    h_up = env.h_at(up_s)[0]
    # each polygon edge is one point's constraint: the one binding between its two end vertices
    ja = env.g_at(0.5 * (low_s[1:] + low_s[:-1]))[1]
    jb = env.h_at(0.5 * (up_s[1:] + up_s[:-1]))[1]
    return s_lo, s_hi, np.concatenate([low_s, up_s]), np.concatenate([g_low, h_up]), ja, jb


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
