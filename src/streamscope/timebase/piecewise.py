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

from streamscope.timebase import steps
from streamscope.timebase.burst import CalibrationError, Fit, Ticks
from streamscope.timebase.cones import Cone, Cones, anchor_cones, offsets

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


#: A straight line: reference tick, slope (ns per tick), host ns at the reference.
Line = tuple[int, float, float]


class ClockModel:
    """Piecewise-linear map of one clock domain from every burst of a run.

    ``fits`` are one domain's bursts in time order (strictly increasing ``x0_ticks``). Feasible
    bursts are anchors: between two anchors of one segment the map is the straight line between
    their estimates at their centres. Before a segment's first anchor and after its last, it
    extrapolates through the nearest anchor's estimate with that burst's own slope or, where the
    slope it shares with its neighbour is pinned tighter (short bursts, whose own slope is known
    to ~RTT / span), with the slope of their join. A burst starts a new segment when its own round
    trips admit no line, when the burst before it did not, or when no clock drifting at most
    ``drift_ppb_per_s`` can meet it and its neighbours (a step; see ``steps.py``). Across a step
    the earlier side's line is used up to the first reading of the later side's first burst, and
    the bounds cover both sides and whatever the clock did between the two bursts: it only runs
    forwards, never slower than the slowest rate either burst admits less
    ``max_rate_change_ppm`` (a step, a change of rate, or both may lie between them).

    Hard bounds hold while the clock's rate drifts no faster than ``drift_ppb_per_s`` (ppb per
    second of host time) but for steps and sudden changes of rate of at most
    ``max_rate_change_ppm``, each burst is short enough for the clock to be linear across it,
    and no two steps, nor two changes of rate, lie in neighbouring gaps between bursts (a step
    and a change of rate may: each can hide the other from the burst beyond it). Past the run's
    first and last bursts the clock is taken to change no more than it drifts.
    Between two bursts of a segment: their bounds at their centres joined linearly and widened
    by a*(x - xa)*(xb - x)/2, and by the largest step the segment could hide in that gap (one
    no larger than both bursts' spreads together cannot split it; a larger one is split off only
    where a third burst before or after misses the line through the other two, which a third
    burst close to its neighbour does only for a step many times its spread, and a change of
    rate just beyond tilts back towards the line: see ``_hidden``). Two bursts alone between
    splits are bounded as across a step unless a split beside them only a step explains (then
    only a change of rate may lie between them). From each anchor outwards: the spread of its
    feasible lines, and of the lines that meet it and its segment neighbour (with the drift
    allowance, and between bursts the change of rate their gap may hide), plus a*d**2/2.
    All that apply hold, so the tightest is used. ``tick_period_ns`` is the nominal period: only
    a model without fits uses it (ticks * period, unbounded); the allowance uses measured rates.
    """

    __slots__ = (
        "_backward", "_fits", "_forward", "_open_after", "_open_before", "_own", "_piece_b",
        "_piece_s", "_piece_x0", "_pieces_at", "_seg", "_segments", "_step_after", "_step_before",
        "_x0", "_xhi", "_xlo", "drift_ppb_per_s", "max_rate_change_ppm", "tick_period_ns",
    )  # fmt: skip

    def __init__(
        self,
        fits: Sequence[Fit],
        *,
        drift_ppb_per_s: float = 100.0,
        tick_period_ns: float = 1.0,
        max_rate_change_ppm: float = 200.0,
    ) -> None:
        _check_allowances(drift_ppb_per_s, tick_period_ns)
        self._fits = tuple(fits)
        self.drift_ppb_per_s = float(drift_ppb_per_s)
        self.tick_period_ns = float(tick_period_ns)
        self.max_rate_change_ppm = float(max_rate_change_ppm)
        _check_time_order(self._fits)
        anchors = self._split_segments()
        af = [self._fits[k] for k in anchors]
        self._x0 = np.array([f.x0_ticks for f in af], dtype=np.int64)
        self._xlo = np.array([f.x_lo_ticks for f in af], dtype=np.int64)
        self._xhi = np.array([f.x_hi_ticks for f in af], dtype=np.int64)
        own, fwd, bwd = anchor_cones(af, self._seg, self.drift_ppb_per_s)
        self._build_cones(own, fwd, bwd)
        self._open_before, self._open_after = _open_ends(self._fits, anchors)
        best = _extrapolations(af, own, fwd, bwd)
        self._pieces_at, self._piece_x0, self._piece_s, self._piece_b = self._pieces(af, best)

    def _split_segments(self) -> list[int]:
        """Split the bursts into segments between steps; returns the anchors (the feasible
        bursts' indices), each with its segment and whether only a step explains the split
        before it and the one after it."""
        self._segments = steps.segments(self._fits, self.drift_ppb_per_s)
        seg_of = np.zeros(len(self._fits), dtype=np.int64)
        for i, (a, b) in enumerate(self._segments):
            seg_of[a:b] = i
        anchors = [k for k, f in enumerate(self._fits) if f.feasible]
        self._seg = seg_of[anchors]
        stepped = steps.needs_step(
            self._fits, self._segments, self.drift_ppb_per_s, self.max_rate_change_ppm
        )
        self._step_before = np.array([False, *stepped], dtype=bool)[self._seg]
        self._step_after = np.array([*stepped, False], dtype=bool)[self._seg]
        return anchors

    def _build_cones(self, own: list[Cone], fwd: list[Cone], bwd: list[Cone]) -> None:
        """The anchors' own cones, and those they share forwards and backwards: a shared one
        is tilted by the change of rate its gap may hide."""
        drift, rate = self.drift_ppb_per_s, self.max_rate_change_ppm
        self._own = Cones(own, drift)
        self._forward = Cones(fwd, drift, rate, _shared(fwd, own))
        self._backward = Cones(bwd, drift, rate, _shared(bwd, own))

    def _pieces(self, af: list[Fit], best: list[tuple[Line, Line]]) -> tuple[I64, I64, F64, F64]:
        """The estimate as straight pieces: piece p covers [at[p-1], at[p]) and is
        s[p] * (x - x0[p]) + b[p]. ``best`` holds each anchor's (forward, backward) line."""
        if not af:  # no anchors: the nearest burst's least-violating line, or the nominal map
            lines = [(f.x0_ticks, f.s_ns_per_tick, f.b_ns) for f in self._fits] or [
                (0, self.tick_period_ns, 0.0)
            ]
            mids = [(a[0] + b[0]) // 2 for a, b in itertools.pairwise(lines)]
            return _arrays(mids, lines)
        lines = [best[0][1]]
        at: list[int] = []
        for k in range(1, len(af)):
            fa, fb = af[k - 1], af[k]
            at.append(fa.x0_ticks)
            if self._seg[k - 1] == self._seg[k]:
                slope = (fb.b_ns - fa.b_ns) / (fb.x0_ticks - fa.x0_ticks)
                lines.append((fa.x0_ticks, slope, fa.b_ns))
            else:
                lines.append(best[k - 1][0])
                at.append(max(fb.x_lo_ticks, fa.x0_ticks))
                lines.append(best[k][1])
        at.append(af[-1].x0_ticks)
        lines.append(best[-1][0])
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
        d = offsets(x, self._piece_x0[p])
        out: F64 = self._piece_s[p] * d + self._piece_b[p]
        return out.reshape(x.shape)

    def bounds(self, ticks: Ticks) -> tuple[F64, F64]:
        """Hard bounds (lo, hi) of host ns at ``ticks`` (see the class docstring for when they
        hold); (-inf, inf) where no burst pins the clock (no feasible fit, or past a step that
        happened inside a burst at either end of the run)."""
        x = np.asarray(ticks)
        lo, hi = self._bounds(x.reshape(-1))
        return lo.reshape(x.shape), hi.reshape(x.shape)

    def _bounds(self, x: NDArray[Any]) -> tuple[F64, F64]:
        m = self._x0.size
        if m == 0:
            return np.full(x.size, -np.inf), np.full(x.size, np.inf)
        j = np.searchsorted(self._x0, x, side="right")
        ia, ib = np.clip(j - 1, 0, m - 1), np.clip(j, 0, m - 1)
        inner = (j > 0) & (j < m)
        outward = self._outward(x, ia, ib, inner)
        lo_a, hi_a, lo_b, hi_b = outward
        lo_in, hi_in, same = self._within_segment(x, ia, ib, inner, outward)
        # across a step the truth follows one side or the other, or did both and more between
        # the bursts: it only ran forwards, no slower than the slowest rate allowed
        lo_m, hi_m = self._monotone(x, ia, ib)
        lo_x = np.minimum(np.minimum(lo_a, lo_b), lo_m)
        hi_x = np.maximum(np.maximum(hi_a, hi_b), hi_m)
        lo = np.where(same, lo_in, np.where(inner, lo_x, lo_a))
        hi = np.where(same, hi_in, np.where(inner, hi_x, hi_a))
        lo = np.where(j == 0, lo_b, lo)
        hi = np.where(j == 0, hi_b, hi)
        xf = x.astype(np.float64)
        open_ = (xf < self._open_before) | (xf >= self._open_after)
        return np.where(open_, -np.inf, lo), np.where(open_, np.inf, hi)

    def _outward(
        self, x: NDArray[Any], ia: NDArray[np.intp], ib: NDArray[np.intp], inner: NDArray[np.bool_]
    ) -> tuple[F64, F64, F64, F64]:
        """Bounds (lo, hi) after anchor a, then (lo, hi) before anchor b: each one's own cone
        and the one it shares, both holding (past the run's first and last bursts nothing is
        known of changes of rate: the lines extrapolate as if there were none, so a shared one
        is not tilted there either)."""
        (lo_a, hi_a), (lo_fa, hi_fa) = self._own.bounds(x, ia), self._forward.bounds(x, ia, inner)
        (lo_b, hi_b), (lo_bb, hi_bb) = self._own.bounds(x, ib), self._backward.bounds(x, ib, inner)
        lo_a, hi_a = np.maximum(lo_a, lo_fa), np.minimum(hi_a, hi_fa)
        lo_b, hi_b = np.maximum(lo_b, lo_bb), np.minimum(hi_b, hi_bb)
        return lo_a, hi_a, lo_b, hi_b

    def _within_segment(
        self,
        x: NDArray[Any],
        ia: NDArray[np.intp],
        ib: NDArray[np.intp],
        inner: NDArray[np.bool_],
        outward: tuple[F64, F64, F64, F64],
    ) -> tuple[F64, F64, NDArray[np.bool_]]:
        """Bounds (lo, hi) between anchors a and b of one segment, and where they apply (the
        two are of one segment, and no step may hide between them)."""
        lo_a, hi_a, lo_b, hi_b = outward
        same = inner & (self._seg[ia] == self._seg[ib])
        da = offsets(x, self._x0[ia])
        gap = (self._x0[ib] - self._x0[ia]).astype(np.float64)
        t = np.divide(da, gap, out=np.zeros_like(da), where=gap > 0)
        # their bounds at their centres, joined, widened by the drift allowance
        # k*(x - xa)*(xb - x)/2
        (ca_lo, ca_hi), (cb_lo, cb_hi) = self._own.at_ref(ia), self._own.at_ref(ib)
        kappa = np.maximum(self._own.kappa[ia], self._own.kappa[ib])
        allow = 0.5 * kappa * da * (gap - da)
        # ... and by the largest step the bursts around the gap cannot show: one no larger than
        # the two bursts' spreads together lets a single line meet both; a larger one is split
        # off where a third burst of the segment, before or after, misses the line through the
        # other two by more than their spreads leave room for. How much more grows with the
        # lever: a third burst close to its neighbour (the run's end burst, shortly after the
        # last periodic one) shows only a large step, so the gap's bounds must allow the rest.
        spread_a, spread_b = ca_hi - ca_lo, cb_hi - cb_lo
        hidden = self._hidden(ia, ib, spread_a, spread_b)
        hide = np.maximum(spread_a + spread_b, np.where(np.isfinite(hidden), hidden, 0.0))
        # two bursts alone between splits: beside a split only a step explains, no second step
        # lies between them, but a change of rate may (the line strays from the chord by at
        # most the change times a quarter of the gap); otherwise nothing shows whether a step
        # hides between them too, so they are bounded as across one
        if len(self._segments) > 1:
            lone = ~np.isfinite(hidden)
            calm = self._step_before[ia] | self._step_after[ib]
            kink = 0.25 * self.max_rate_change_ppm * 1e-6 * np.abs(self._own.vs[ia]).max(axis=1)
            hide = np.where(lone & calm, hide + kink * gap, hide)
            same &= ~lone | calm
        lo_in = np.maximum(ca_lo + t * (cb_lo - ca_lo) - allow, np.maximum(lo_a, lo_b)) - hide
        hi_in = np.minimum(ca_hi + t * (cb_hi - ca_hi) + allow, np.minimum(hi_a, hi_b)) + hide
        return lo_in, hi_in, same

    def _hidden(self, ia: NDArray[np.intp], ib: NDArray[np.intp], w_a: F64, w_b: F64) -> F64:
        """Per gap between anchors a and b: the largest step in it that the anchors around it
        in the same segment could not have shown; inf where the segment has no anchor but a
        and b (two bursts alone: only the drift allowance holds).

        The anchor before a shows a step unless the line through two of the three, tilted
        within their spreads, still meets the third (its lever: the closer it is to a, the
        larger the step it misses); likewise the anchor after b. A change of rate just beyond
        a or b tilts the third burst back towards the line through the other two: a step of up
        to the rate allowed to change (``max_rate_change_ppm``) times the gap, with such a
        change right beside it, passes that side's test. It is taken to fool one side at most: a gap with a neighbour
        on one side only allows the masked amount, one with both the larger of (one side's
        masked test, the other's plain one) where that is the smaller."""
        m = self._x0.size
        x0 = self._x0.astype(np.float64)
        gap = x0[ib] - x0[ia]
        rate = self.max_rate_change_ppm * 1e-6 * np.abs(self._own.vs[ia]).max(axis=1)
        h_z, m_z = np.full(ia.shape, np.inf), np.zeros(ia.shape)
        h_c, m_c = np.full(ia.shape, np.inf), np.zeros(ia.shape)
        z, c = ia - 1, ib + 1
        ok_z = (z >= 0) & (ib > ia)
        ok_z[ok_z] &= self._seg[z[ok_z]] == self._seg[ia[ok_z]]
        if ok_z.any():
            zi = z[ok_z]
            z_lo, z_hi = self._own.at_ref(zi)
            lever = np.maximum(x0[ia[ok_z]] - x0[zi], 1.0)
            r = gap[ok_z] / lever
            h_z[ok_z] = 0.5 * ((z_hi - z_lo) * r + w_a[ok_z] * (1 + r) + w_b[ok_z])
            m_z[ok_z] = rate[ok_z] * gap[ok_z]
        ok_c = (c < m) & (ib > ia)
        ok_c[ok_c] &= self._seg[np.minimum(c[ok_c], m - 1)] == self._seg[ib[ok_c]]
        if ok_c.any():
            ci = c[ok_c]
            c_lo, c_hi = self._own.at_ref(ci)
            lever = np.maximum(x0[ci] - x0[ib[ok_c]], 1.0)
            r = gap[ok_c] / lever
            h_c[ok_c] = 0.5 * ((c_hi - c_lo) * r + w_b[ok_c] * (1 + r) + w_a[ok_c])
            m_c[ok_c] = rate[ok_c] * gap[ok_c]
        # events are taken to be at least a gap apart: beside a split that only a step
        # explains, no second step hides, so that side's missing test needs no mask
        m_c = np.where(~ok_z & self._step_before[ia], 0.0, m_c)
        m_z = np.where(~ok_c & self._step_after[ib], 0.0, m_z)
        out: F64 = np.maximum(np.minimum(h_z + m_z, h_c), np.minimum(h_z, h_c + m_c))
        return out

    def _monotone(
        self, x: NDArray[Any], ia: NDArray[np.intp], ib: NDArray[np.intp]
    ) -> tuple[F64, F64]:
        """Bounds between anchors a and b from monotony alone: after a's last reading the clock
        took at most (ticks) x (the slowest rate: the largest ns per tick either cone admits,
        less the allowed change of rate) to get to x, and before b's first reading at most as
        long again to get from x to it."""
        slow = 1.0 + self.max_rate_change_ppm * 1e-6
        s_a = self._own.vs[ia].max(axis=1) * slow
        s_b = self._own.vs[ib].max(axis=1) * slow
        xa, xb = self._xhi[ia], self._xlo[ib]
        _, hi_at_a = self._own.bounds(xa, ia)
        lo_at_b, _ = self._own.bounds(xb, ib)
        hi = hi_at_a + np.maximum(offsets(x, xa), 0.0) * s_a
        lo = lo_at_b - np.maximum(-offsets(x, xb), 0.0) * s_b
        return lo, hi

    def to_dict(self) -> dict[str, Any]:
        return {
            "fits": [f.to_dict() for f in self._fits],
            "drift_ppb_per_s": self.drift_ppb_per_s,
            "tick_period_ns": self.tick_period_ns,
            "max_rate_change_ppm": self.max_rate_change_ppm,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ClockModel:
        return cls(
            [Fit.from_dict(f) for f in d["fits"]],
            drift_ppb_per_s=float(d["drift_ppb_per_s"]),
            tick_period_ns=float(d["tick_period_ns"]),
            max_rate_change_ppm=float(d.get("max_rate_change_ppm", 200.0)),
        )


def _check_allowances(drift_ppb_per_s: float, tick_period_ns: float) -> None:
    if not np.isfinite(drift_ppb_per_s) or drift_ppb_per_s < 0:
        raise CalibrationError(f"drift_ppb_per_s must be >= 0 and finite; got {drift_ppb_per_s}")
    if not tick_period_ns > 0:
        raise CalibrationError(f"tick_period_ns must be > 0; got {tick_period_ns}")


def _check_time_order(fits: Sequence[Fit]) -> None:
    x0_all = [f.x0_ticks for f in fits]
    for k in range(1, len(x0_all)):
        if x0_all[k] <= x0_all[k - 1]:
            raise CalibrationError(
                f"fits must be in time order: burst {k} is centred at tick {x0_all[k]}, "
                f"not after burst {k - 1} at {x0_all[k - 1]}"
            )


def _shared(cones: list[Cone], own: list[Cone]) -> list[bool]:
    """Which of ``cones`` an anchor shares with its neighbour (not its own)."""
    return [c is not o for c, o in zip(cones, own, strict=True)]


def _open_ends(fits: Sequence[Fit], anchors: list[int]) -> tuple[float, float]:
    """Where the bounds open: before the last infeasible burst ahead of the first anchor, and
    from the first one after the last anchor (-inf and inf where there is none)."""
    before = list(fits[: anchors[0]]) if anchors else []
    after = list(fits[anchors[-1] + 1 :]) if anchors else []
    open_before = float(before[-1].x_hi_ticks) if before else -np.inf
    open_after = float(after[0].x_lo_ticks) if after else np.inf
    return open_before, open_after


def _extrapolations(
    af: list[Fit], own: list[Cone], fwd: list[Cone], bwd: list[Cone]
) -> list[tuple[Line, Line]]:
    """Per anchor, the (forward, backward) line to extrapolate with: through its estimate with
    its own slope, or with the slope of the join to its neighbour where the pair pins the slope
    better than the burst alone."""
    joins = [(b.b_ns - a.b_ns) / (b.x0_ticks - a.x0_ticks) for a, b in itertools.pairwise(af)]
    return [
        (
            (f.x0_ticks, f.s_ns_per_tick if o.width <= fw.width else joins[k - 1], f.b_ns),
            (f.x0_ticks, f.s_ns_per_tick if o.width <= bw.width else joins[k], f.b_ns),
        )
        for k, (f, o, fw, bw) in enumerate(zip(af, own, fwd, bwd, strict=True))
    ]


def _arrays(at: list[int], lines: list[Line]) -> tuple[I64, I64, F64, F64]:
    x0, s, b = zip(*lines, strict=True)
    return (
        np.array(at, dtype=np.int64),
        np.array(x0, dtype=np.int64),
        np.array(s, dtype=np.float64),
        np.array(b, dtype=np.float64),
    )
