"""One clock domain's map from raw ticks to virtual nanoseconds, with how far the truth may lie.

In: raw ticks of one clock domain (int64 arrays, or one int). Out: int64 virtual ns since the
run's start and, per tick or per batch, the half-width of their hard bounds (ns). Three kinds:
the host's (exact: its ticks are the reference's ns), a calibrated domain's (its piecewise
``ClockModel``), and a domain never calibrated (its nominal tick period only: bounds infinite,
its offset unknown). ``timebase.domains`` builds one per domain; nothing else converts ticks.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from streamscope.timebase.piecewise import ClockModel

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
_INT64_MAX = int(np.iinfo(np.int64).max)


class ClockMap(Protocol):
    """Maps one domain's ticks to virtual ns since the run started."""

    def to_ns(self, ticks: I64) -> tuple[I64, float]:
        """Virtual ns of each tick, and the largest bound half-width among them (ns)."""
        ...

    def to_ns_each(self, ticks: I64) -> tuple[I64, F64]:
        """Virtual ns of each tick, and each one's bound half-width (ns)."""
        ...

    def scalar_to_ns(self, ticks: int) -> int:
        """Virtual ns of one tick (a watermark; the int64 maximum stays the maximum)."""
        ...


class HostMap:
    """The host domain: ticks are monotonic nanoseconds, so only the run's start is subtracted."""

    __slots__ = ("t0_ticks",)

    def __init__(self, t0_ticks: int) -> None:
        self.t0_ticks = t0_ticks

    def to_ns(self, ticks: I64) -> tuple[I64, float]:
        return ticks - np.int64(self.t0_ticks), 0.0

    def to_ns_each(self, ticks: I64) -> tuple[I64, F64]:
        return ticks - np.int64(self.t0_ticks), np.zeros(len(ticks))

    def scalar_to_ns(self, ticks: int) -> int:
        if ticks >= _INT64_MAX:
            return ticks
        return ticks - self.t0_ticks


class FittedMap:
    """A calibrated domain: its piecewise clock model, onto the host's ns since ``t0_host_ns``.
    The distance from an estimate to its bounds is to the farther of them (across a clock step
    the estimate follows one side and the bounds cover both, so it is not their centre)."""

    __slots__ = ("model", "t0_host_ns")

    def __init__(self, model: ClockModel, t0_host_ns: int) -> None:
        self.model = model
        self.t0_host_ns = t0_host_ns

    def _place(self, ticks: I64) -> tuple[F64, I64]:
        host_ns = np.asarray(self.model.to_ns(ticks), dtype=np.float64)
        return host_ns, np.rint(host_ns - float(self.t0_host_ns)).astype(np.int64)

    def to_ns(self, ticks: I64) -> tuple[I64, float]:
        host_ns, t = self._place(ticks)
        if not len(ticks):
            return t, 0.0
        lo, hi = self.model.bounds(ticks)
        return t, float(reach(host_ns, lo, hi).max())

    def to_ns_each(self, ticks: I64) -> tuple[I64, F64]:
        host_ns, t = self._place(ticks)
        lo, hi = self.model.bounds(ticks)
        return t, reach(host_ns, lo, hi)

    def scalar_to_ns(self, ticks: int) -> int:
        host_ns = float(np.asarray(self.model.to_ns(np.array([ticks], np.int64)))[0])
        return round(host_ns - self.t0_host_ns)

    def bound_series(self, duration_ns: int, samples: int) -> tuple[I64, F64]:
        """The half-width of the bounds at ``samples`` points evenly across [0, ``duration_ns``]
        of virtual time (ticks found by inverting the map at the first and last bursts)."""
        fits = self.model.fits
        lo_t = min(f.x0_ticks for f in fits)
        hi_t = max(f.x0_ticks for f in fits)
        ends = self.model.to_ns(np.array([lo_t, hi_t], dtype=np.int64)) - float(self.t0_host_ns)
        span = float(ends[1] - ends[0])
        slope = (hi_t - lo_t) / span if span > 0 else 1.0 / max(self.model.tick_period_ns, 1e-9)
        t_virtual = np.linspace(0.0, float(max(duration_ns, 1)), samples)
        ticks = np.rint(lo_t + (t_virtual - float(ends[0])) * slope).astype(np.int64)
        ns, half = self.to_ns_each(ticks)
        ok = np.isfinite(half) & (ns >= 0)
        order = np.argsort(ns[ok], kind="stable")
        return ns[ok][order], half[ok][order]


class NominalMap:
    """A domain never calibrated: its ticks scaled by the nominal period, its offset unknown
    (bounds infinite)."""

    __slots__ = ("tick_period_ns",)

    def __init__(self, tick_period_ns: float) -> None:
        self.tick_period_ns = tick_period_ns

    def to_ns(self, ticks: I64) -> tuple[I64, float]:
        return np.rint(ticks * self.tick_period_ns).astype(np.int64), float("inf")

    def to_ns_each(self, ticks: I64) -> tuple[I64, F64]:
        nominal = np.rint(ticks * self.tick_period_ns).astype(np.int64)
        return nominal, np.full(len(ticks), np.inf)

    def scalar_to_ns(self, ticks: int) -> int:
        return round(ticks * self.tick_period_ns)


def reach(est: F64, lo: Any, hi: Any) -> F64:
    """How far the truth may lie from each estimate: to the farther of its bounds."""
    out: F64 = np.maximum(est - np.asarray(lo), np.asarray(hi) - est)
    return np.maximum(out, 0.0)
