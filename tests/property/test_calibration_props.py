"""Calibration recovery: any linear clock, tick and delays are recovered within the hard bounds.

A synthetic device clock f(x) = host0 + c + s * (x - x_ref), with s = q * (1 + rate error), is
read through round trips with random one-way delays; the truth must lie inside every bound.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from streamscope.timebase.calibration import CalibrationError, ClockModel, Exchanges, Fit, fit
from streamscope.timebase.clockmap import reach

F64 = NDArray[np.float64]
X_REF = 3_000_000_000
TOL_NS = 2e-3  # float64 rounding of absolute host ns up to ~2e12 (ulp ~2.4e-4)


@dataclass(frozen=True)
class Link:
    """A linear clock and the delays of the link to it."""

    host0: int
    q: float
    s: float
    c: float
    dmin_f: float
    dmin_b: float
    jit_f: float
    jit_b: float
    kappa: float = 0.0  # f'' in ns per tick**2: a rate drifting at a constant pace

    def host_ns(self, x: F64) -> F64:
        y = x - X_REF
        return self.host0 + self.c + self.s * y + 0.5 * self.kappa * y * y

    def y_at(self, t_ns: F64) -> F64:
        """Device position - X_REF at host time t_ns (relative to host0)."""
        r = t_ns - self.c
        return 2 * r / (self.s + np.sqrt(self.s**2 + 2 * self.kappa * r))

    def burst(self, rng: np.random.Generator, start_ns: float, dur_ns: float, n: int) -> Exchanges:
        t1 = start_ns + np.sort(rng.uniform(0, dur_ns, n))
        t2 = t1 + self.dmin_f + rng.exponential(self.jit_f, n)
        t3 = t2 + self.dmin_b + rng.exponential(self.jit_b, n)
        return Exchanges(
            t1_ns=self.host0 + np.floor(t1).astype(np.int64),
            t2_ticks=X_REF + np.floor(self.y_at(t2)).astype(np.int64),
            t3_ns=self.host0 + np.floor(t3).astype(np.int64),
        )


@st.composite
def links(draw: st.DrawFn) -> Link:
    q = draw(st.one_of(st.just(1.0), st.floats(1.0, 2000.0)))
    ppm = draw(st.floats(-200.0, 200.0))
    return Link(
        host0=draw(st.integers(0, 2 * 10**12)),
        q=q,
        s=q * (1 + ppm * 1e-6),
        c=draw(st.floats(0.0, 1e9)),
        dmin_f=draw(st.floats(0.0, 5000.0)),
        dmin_b=draw(st.floats(0.0, 5000.0)),
        jit_f=draw(st.sampled_from([0.0, 1.0, 50.0, 300.0, 3000.0])),
        jit_b=draw(st.sampled_from([0.0, 1.0, 50.0, 300.0, 3000.0])),
    )


def check_inside(f: Fit, link: Link, x: F64) -> None:
    lo, hi = f.bounds(x)
    truth = link.host_ns(x)
    assert np.all(lo - TOL_NS <= truth), float(np.min(truth - lo))
    assert np.all(truth <= hi + TOL_NS), float(np.min(hi - truth))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    link=links(),
    n=st.integers(2, 300),
    dur_ns=st.floats(1e3, 1e9),
    method=st.sampled_from(["hull", "timetrial"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_linear_clock_lies_inside_the_hard_bounds(
    link: Link, n: int, dur_ns: float, method: str, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    ex = link.burst(rng, 0.0, dur_ns, n)
    if int(ex.t2_ticks.max() - ex.t2_ticks.min()) < 2:
        with pytest.raises(CalibrationError, match="span"):
            fit(ex, method)
        return
    f = fit(ex, method)
    assert f.feasible and f.bound_width_ns() >= 0
    x = rng.uniform(f.x_lo_ticks, f.x_hi_ticks, 64)
    check_inside(f, link, x)
    s_lo, s_hi = f.slope_range_ns_per_tick
    assert s_lo - 1e-12 * link.s <= link.s <= s_hi + 1e-12 * link.s
    if method == "hull":  # the estimate is one of the feasible lines
        lo, hi = f.bounds(x)
        est = f.to_ns(x)
        assert np.all((lo - TOL_NS <= est) & (est <= hi + TOL_NS))
    assert Fit.from_dict(f.to_dict()) == f


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    link=links(),
    gaps_s=st.lists(st.floats(0.05, 20.0), min_size=1, max_size=5),
    drift_ppb_per_s=st.sampled_from([0.0, 10.0, 100.0]),
    seed=st.integers(0, 2**32 - 1),
)
# A coarse tick and no jitter: a second past two bursts 50 ms apart, the line through the last
# one's estimate with their join's slope leaves the bounds.
@example(link=Link(0, 1031.125, 1031.125, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0), gaps_s=[0.05],
         drift_ppb_per_s=0.0, seed=0)  # fmt: skip
def test_a_steady_clock_is_one_segment_bounded_everywhere(
    link: Link, gaps_s: list[float], drift_ppb_per_s: float, seed: int
) -> None:
    """Without drift or steps the bursts are never split (even with a zero drift allowance),
    and the model's bounds hold between, before and after the bursts. The estimate (a straight
    join of the fits' estimates, or a line through the nearest one) is not always inside the
    bounds, which intersect several cones, but across the bursts it strays from the truth by no
    more than the bounds' width plus the widest fit's (the fits' own estimates lie in their own
    bounds), and everywhere by no more than its distance to the farther bound."""
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0.0], np.cumsum(gaps_s) * 1e9])
    dur = max(2e7, 50 * link.q)
    fits = [fit(link.burst(rng, t, dur, 100), "hull") for t in starts]
    model = ClockModel(fits, drift_ppb_per_s=drift_ppb_per_s, tick_period_ns=link.q)
    assert model.segments() == [(0, len(fits))]
    x = np.linspace(fits[0].x_lo_ticks - 10**6, fits[-1].x_hi_ticks + 10**6, 257)
    lo, hi = model.bounds(x)
    truth = link.host_ns(x)
    assert np.all(lo - TOL_NS <= truth) and np.all(truth <= hi + TOL_NS)
    est = model.to_ns(x)
    widest = max(f.bound_width_ns() for f in fits)
    err = np.abs(est - truth)
    spanned = (x >= fits[0].x_lo_ticks) & (x <= fits[-1].x_hi_ticks)
    assert np.all(err[spanned] <= (hi - lo)[spanned] + widest + TOL_NS)
    # Past the bursts the line goes on with its slope's error while the bounds intersect cones:
    # a second past two bursts 50 ms apart it left them (by 245 ns: a 1 us tick, no jitter).
    # What the monitor reports, the distance to the farther bound, still covers the truth.
    assert np.all(err <= reach(est, lo, hi) + TOL_NS)
    centres = np.array([f.x0_ticks for f in fits])
    assert np.allclose(model.to_ns(centres), [f.b_ns for f in fits], rtol=0, atol=TOL_NS)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    link=links(),
    gaps_s=st.lists(st.floats(0.05, 20.0), min_size=1, max_size=5),
    drift_ppb_per_s=st.floats(1.0, 1000.0),
    drift_share=st.floats(-1.0, 1.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_drifting_clock_stays_inside_the_allowance(
    link: Link, gaps_s: list[float], drift_ppb_per_s: float, drift_share: float, seed: int
) -> None:
    """A rate drifting at up to the stated ppb/s (either way) stays inside the model's bounds
    everywhere, extrapolation included; no step is reported. The delay floors are kept >= 1 ns
    so that each 20 ms burst's own bend (< 0.05 ns) stays within its round trips."""
    kappa = drift_share * drift_ppb_per_s * 1e-18 * link.s**2
    link = dataclasses.replace(
        link, dmin_f=max(link.dmin_f, 1.0), dmin_b=max(link.dmin_b, 1.0), kappa=kappa
    )
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0.0], np.cumsum(gaps_s) * 1e9])
    fits = [fit(link.burst(rng, t, max(2e7, 50 * link.q), 100), "hull") for t in starts]
    model = ClockModel(fits, drift_ppb_per_s=drift_ppb_per_s, tick_period_ns=link.q)
    assert model.segments() == [(0, len(fits))]
    pad = (fits[-1].x0_ticks - fits[0].x0_ticks) // 4 + 10**6
    x = np.linspace(fits[0].x_lo_ticks - pad, fits[-1].x_hi_ticks + pad, 257)
    lo, hi = model.bounds(x)
    truth = link.host_ns(x)
    assert np.all(lo - TOL_NS <= truth) and np.all(truth <= hi + TOL_NS)
