"""A clock domain over a whole run: every burst's fit in, a piecewise-linear tick → host-ns map out.

Between bursts the map interpolates; clock steps split it into segments that are never
interpolated across. Hard bounds allow for the rate drifting at up to a stated ppb per second.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.timebase.burst import CalibrationError, Fit, Ticks

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]
#: Rounding slack (ns) when deciding that two bursts cannot lie on one clock.
_STEP_TOL_NS = 1e-3


def _offsets(x: NDArray[Any], x0: NDArray[np.integer[Any]]) -> F64:
    """x - x0 as float64, exact for integer x (the subtraction happens in int64)."""
    if x.dtype.kind in "iub":
        return (x.astype(np.int64) - x0).astype(np.float64)
    return x.astype(np.float64) - x0.astype(np.float64)


def _polygon(f: Fit) -> tuple[F64, F64]:
    """A fit's feasible lines as vertices (slope offset from its estimate, ns at its centre)."""
    return np.asarray(f.region_ds_ns_per_tick), np.asarray(f.region_db_ns)


def _edge_normals(px: F64, py: F64) -> F64:
    """Unit normals of a closed polygon's edges (vertices in order), zero-length edges dropped."""
    ex, ey = np.roll(px, -1) - px, np.roll(py, -1) - py
    n = np.stack([-ey, ex], axis=1)
    norm = np.hypot(n[:, 0], n[:, 1])
    return n[norm > 0] / norm[norm > 0, None]


def continuous(fa: Fit, fb: Fit, drift_ppb_per_s: float) -> bool:
    """Whether one clock whose rate drifts at most ``drift_ppb_per_s`` can satisfy both bursts.

    The truth's tangents la at a's centre and lb at b's (Delta ticks later) are feasible lines of
    their bursts, and |g''| <= k bounds their difference: |sa - sb| <= k*Delta and la, lb differ by
    at most k*Delta**2/2 at either centre. That difference set K is a parallelogram, so the test is
    whether polygon A meets polygon B (+) K, decided by separating axes (the edge normals of A, B
    and K). Only a clock step (or a faster drift) makes it fail.
    """
    delta = float(fb.x0_ticks - fa.x0_ticks)
    s = max(abs(fa.s_ns_per_tick), abs(fb.s_ns_per_tick))
    kappa = drift_ppb_per_s * 1e-18 * s * s  # ns per tick**2
    ds_a, db_a = _polygon(fa)
    ds_b, db_b = _polygon(fb)
    # both in (slope * Delta, value at a's centre), relative to a's estimate: ns on both axes
    ax, ay = ds_a * delta, db_a
    shift = fb.b_ns - fb.s_ns_per_tick * delta - fa.b_ns
    bx = (fb.s_ns_per_tick - fa.s_ns_per_tick + ds_b) * delta
    by = shift + db_b - ds_b * delta
    eps = 0.5 * kappa * delta * delta
    kx = np.array([0.0, -1.0, 0.0, 1.0]) * (kappa * delta * delta)
    ky = np.array([1.0, 1.0, -1.0, -1.0]) * eps
    axes = np.concatenate([_edge_normals(ax, ay), _edge_normals(bx, by), _edge_normals(kx, ky)])
    pa = axes @ np.stack([ax, ay])
    pb = axes @ np.stack([bx, by])
    pk = axes @ np.stack([kx, ky])
    lo_b, hi_b = pb.min(axis=1) + pk.min(axis=1), pb.max(axis=1) + pk.max(axis=1)
    apart = (pa.max(axis=1) < lo_b - _STEP_TOL_NS) | (hi_b < pa.min(axis=1) - _STEP_TOL_NS)
    return not bool(apart.any())


class ClockModel:
    """Piecewise-linear map of one clock domain from every burst of a run.

    ``fits`` are one domain's bursts in time order (strictly increasing ``x0_ticks``). Feasible
    bursts are anchors: between two anchors of one segment the map is the straight line between
    their estimates at their centres; before the first and after the last it extrapolates the
    nearest fit. A burst starts a new segment when its own round trips admit no line, when the
    burst before it did not, or when no clock drifting at most ``drift_ppb_per_s`` can satisfy
    both it and the previous burst (a step). Across a step the earlier side's fit is used up to
    the first reading of the later side's first burst, and the bounds cover both sides.

    Hard bounds hold while the clock's rate changes no faster than ``drift_ppb_per_s`` (ppb per
    second of host time) and each burst is short enough for the clock to be linear across it.
    ``tick_period_ns`` is the nominal period: only a model without fits uses it (as ticks *
    period, with unbounded bounds); the drift allowance uses the measured rate.
    """

    __slots__ = (
        "_b",
        "_db",
        "_ds",
        "_fits",
        "_kappa",
        "_open_after",
        "_open_before",
        "_piece_b",
        "_piece_s",
        "_piece_x0",
        "_pieces_at",
        "_s",
        "_seg",
        "_segments",
        "_x0",
        "drift_ppb_per_s",
        "tick_period_ns",
    )

    def __init__(
        self, fits: Sequence[Fit], *, drift_ppb_per_s: float = 100.0, tick_period_ns: float = 1.0
    ) -> None:
        if not np.isfinite(drift_ppb_per_s) or drift_ppb_per_s < 0:
            raise CalibrationError(
                f"drift_ppb_per_s must be >= 0 and finite; got {drift_ppb_per_s}"
            )
        if not tick_period_ns > 0:
            raise CalibrationError(f"tick_period_ns must be > 0; got {tick_period_ns}")
        self._fits = tuple(fits)
        self.drift_ppb_per_s = float(drift_ppb_per_s)
        self.tick_period_ns = float(tick_period_ns)
        x0_all = [f.x0_ticks for f in self._fits]
        for k in range(1, len(x0_all)):
            if x0_all[k] <= x0_all[k - 1]:
                raise CalibrationError(
                    f"fits must be in time order: burst {k} is centred at tick {x0_all[k]}, "
                    f"not after burst {k - 1} at {x0_all[k - 1]}"
                )
        # Loops here run once per burst, not per event: each boundary is its own polygon test.
        starts = [0] if self._fits else []
        for k in range(1, len(self._fits)):
            fa, fb = self._fits[k - 1], self._fits[k]
            if not (fa.feasible and fb.feasible and continuous(fa, fb, self.drift_ppb_per_s)):
                starts.append(k)
        self._segments = [
            (a, b) for a, b in zip(starts, [*starts[1:], len(self._fits)], strict=False)
        ]
        seg_of = np.zeros(len(self._fits), dtype=np.int64)
        for i, (a, b) in enumerate(self._segments):
            seg_of[a:b] = i
        anchors = [k for k, f in enumerate(self._fits) if f.feasible]
        af = [self._fits[k] for k in anchors]
        self._seg = seg_of[anchors]
        self._x0 = np.array([f.x0_ticks for f in af], dtype=np.int64)
        self._s = np.array([f.s_ns_per_tick for f in af], dtype=np.float64)
        self._b = np.array([f.b_ns for f in af], dtype=np.float64)
        self._kappa = self.drift_ppb_per_s * 1e-18 * self._s**2
        width = max((len(f.region_ds_ns_per_tick) for f in af), default=1)
        # pad every polygon to one width by repeating its last vertex (min/max are unchanged)
        self._ds = np.array([_pad(f.region_ds_ns_per_tick, width) for f in af]).reshape(-1, width)
        self._db = np.array([_pad(f.region_db_ns, width) for f in af]).reshape(-1, width)
        before = list(self._fits[: anchors[0]]) if anchors else []
        after = list(self._fits[anchors[-1] + 1 :]) if anchors else []
        self._open_before = float(before[-1].x_hi_ticks) if before else -np.inf
        self._open_after = float(after[0].x_lo_ticks) if after else np.inf
        self._pieces_at, self._piece_x0, self._piece_s, self._piece_b = self._pieces(af)

    def _pieces(self, af: list[Fit]) -> tuple[I64, I64, F64, F64]:
        """The estimate as straight pieces: piece p covers [at[p-1], at[p]) and is
        s[p] * (x - x0[p]) + b[p]. One line per anchor, a join between anchors of one segment,
        and across a step the earlier anchor's line up to the later burst's first reading."""
        if not af:  # no anchors: the nearest burst's least-violating line, or the nominal map
            lines = [(f.x0_ticks, f.s_ns_per_tick, f.b_ns) for f in self._fits] or [
                (0, self.tick_period_ns, 0.0)
            ]
            mids = [(a[0] + b[0]) // 2 for a, b in itertools.pairwise(lines)]
            return _arrays(mids, lines)
        lines = [(af[0].x0_ticks, af[0].s_ns_per_tick, af[0].b_ns)]
        at: list[int] = []
        for k in range(1, len(af)):
            fa, fb = af[k - 1], af[k]
            at.append(fa.x0_ticks)
            if self._seg[k - 1] == self._seg[k]:
                slope = (fb.b_ns - fa.b_ns) / (fb.x0_ticks - fa.x0_ticks)
                lines.append((fa.x0_ticks, slope, fa.b_ns))
            else:
                lines.append((fa.x0_ticks, fa.s_ns_per_tick, fa.b_ns))
                at.append(max(fb.x_lo_ticks, fa.x0_ticks))
                lines.append((fb.x0_ticks, fb.s_ns_per_tick, fb.b_ns))
        at.append(af[-1].x0_ticks)
        lines.append((af[-1].x0_ticks, af[-1].s_ns_per_tick, af[-1].b_ns))
        return _arrays(at, lines)

    @property
    def fits(self) -> tuple[Fit, ...]:
        return self._fits

    def segments(self) -> list[tuple[int, int]]:
        """Burst index ranges [start, stop) between detected steps, in time order."""
        return list(self._segments)

    def to_ns(self, ticks: Ticks) -> F64:
        """Host ns (float64) at tick position(s) ``ticks``; same shape as ``ticks``."""
        x = np.asarray(ticks)
        if x.size == 0:
            return np.zeros(x.shape, dtype=np.float64)
        ends = np.searchsorted(self._pieces_at, [x.min(), x.max()], side="right")
        p = ends[:1] if ends[0] == ends[1] else np.searchsorted(self._pieces_at, x, side="right")
        # the usual batch lies on one piece: then its coefficients broadcast as scalars
        d = _offsets(x, self._piece_x0[p])
        out: F64 = self._piece_s[p] * d + self._piece_b[p]
        return out.reshape(x.shape)

    def bounds(self, ticks: Ticks) -> tuple[F64, F64]:
        """Hard bounds (lo, hi) of host ns at ``ticks`` (see the class docstring for when they
        hold); (-inf, inf) where no burst pins the clock (no feasible fit, or past a step that
        happened inside a burst at either end of the run)."""
        x = np.asarray(ticks)
        lo, hi = self._bounds(x.reshape(-1))
        return lo.reshape(x.shape), hi.reshape(x.shape)

    def _line(self, x: NDArray[Any], i: NDArray[np.intp]) -> tuple[F64, F64]:
        """Anchor i's fit bounds at x, widened by the drift allowance k*d**2/2."""
        d = _offsets(x, self._x0[i])
        est = self._s[i] * d + self._b[i]
        spread = self._ds[i] * d[:, None] + self._db[i]
        w = 0.5 * self._kappa[i] * d * d
        return est + spread.min(axis=1) - w, est + spread.max(axis=1) + w

    def _bounds(self, x: NDArray[Any]) -> tuple[F64, F64]:
        m = self._x0.size
        if m == 0:
            return np.full(x.size, -np.inf), np.full(x.size, np.inf)
        j = np.searchsorted(self._x0, x, side="right")
        ia, ib = np.clip(j - 1, 0, m - 1), np.clip(j, 0, m - 1)
        (lo_a, hi_a), (lo_b, hi_b) = self._line(x, ia), self._line(x, ib)
        inner = (j > 0) & (j < m)
        same = inner & (self._seg[ia] == self._seg[ib])
        da = _offsets(x, self._x0[ia])
        gap = (self._x0[ib] - self._x0[ia]).astype(np.float64)
        t = np.divide(da, gap, out=np.zeros_like(da), where=gap > 0)
        # between two bursts of a segment: their bounds at their centres, joined, widened by
        # the drift allowance k*(x - xa)*(xb - x)/2; every bound holds, so the tightest is taken
        ca_lo, cb_lo = (
            self._b[ia] + self._db[ia].min(axis=1),
            self._b[ib] + self._db[ib].min(axis=1),
        )
        ca_hi, cb_hi = (
            self._b[ia] + self._db[ia].max(axis=1),
            self._b[ib] + self._db[ib].max(axis=1),
        )
        allow = 0.5 * np.maximum(self._kappa[ia], self._kappa[ib]) * da * (gap - da)
        lo_in = np.maximum(ca_lo + t * (cb_lo - ca_lo) - allow, np.maximum(lo_a, lo_b))
        hi_in = np.minimum(ca_hi + t * (cb_hi - ca_hi) + allow, np.minimum(hi_a, hi_b))
        # across a step the truth follows one side or the other
        lo = np.where(same, lo_in, np.where(inner, np.minimum(lo_a, lo_b), lo_a))
        hi = np.where(same, hi_in, np.where(inner, np.maximum(hi_a, hi_b), hi_a))
        xf = x.astype(np.float64)
        open_ = (xf < self._open_before) | (xf >= self._open_after)
        return np.where(open_, -np.inf, lo), np.where(open_, np.inf, hi)

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": [f.to_dict() for f in self._fits],
            "drift_ppb_per_s": self.drift_ppb_per_s,
            "tick_period_ns": self.tick_period_ns,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockModel:
        return cls(
            [Fit.from_dict(f) for f in d["fits"]],
            drift_ppb_per_s=float(d["drift_ppb_per_s"]),
            tick_period_ns=float(d["tick_period_ns"]),
        )


def _arrays(at: list[int], lines: list[tuple[int, float, float]]) -> tuple[I64, I64, F64, F64]:
    x0, s, b = zip(*lines, strict=True)
    return (
        np.array(at, dtype=np.int64),
        np.array(x0, dtype=np.int64),
        np.array(s, dtype=np.float64),
        np.array(b, dtype=np.float64),
    )


def _pad(v: tuple[float, ...], width: int) -> list[float]:
    return [*v, *([v[-1]] * (width - len(v)))]
