"""The twin's clocks (see ``_native.Clock``): host, emulated from its parameters, and manual.

In: a kind and, for an emulated clock, its rate, offset, drift, step and tick; host ns to read
at. Out: ticks, as the native core reads them; ``host_ns`` and the host clock's read gap.
"""

from __future__ import annotations

import math
import time

_monotonic_ns = time.monotonic_ns
_floor = math.floor


def host_ns() -> int:
    return _monotonic_ns()


def _measure_gap() -> int:
    gaps = []
    for _ in range(257):
        a = _monotonic_ns()
        gaps.append(_monotonic_ns() - a)
    return sorted(gaps)[128]


_gap = _measure_gap()


def clock_gap_ns() -> int:
    """The median cost of one host clock read (ns), taken off every sampled recording time."""
    return _gap


class Clock:
    """See ``_native.Clock``."""

    __slots__ = (
        "_c0", "_c1", "_c2", "_epoch", "_kind", "_manual", "_rate_at", "_rate_step", "_step",
        "_step_at", "_tick",
    )  # fmt: skip

    def __init__(
        self,
        kind: str = "host",
        *,
        epoch_ns: int = 0,
        c0: float = 0.0,
        c1: float = 1.0,
        c2: float = 0.0,
        step_at: float = math.inf,
        step: float = 0.0,
        tick_ns: float = 1.0,
        start: int = 0,
        rate_at: float = math.inf,
        rate_step: float = 0.0,
    ) -> None:
        if kind not in ("host", "emulated", "manual"):
            raise ValueError(f"clock kind must be host, emulated or manual, not {kind!r}")
        if not tick_ns > 0:
            raise ValueError("tick_ns must be > 0")
        self._kind = kind
        self._epoch = int(epoch_ns)
        self._c0, self._c1, self._c2 = float(c0), float(c1), float(c2)
        self._step_at, self._step, self._tick = float(step_at), float(step), float(tick_ns)
        self._manual = int(start)
        self._rate_at, self._rate_step = float(rate_at), float(rate_step)

    def _emulated(self, host: int) -> int:
        tau = (host - self._epoch) * 1.0
        d = self._c0 + tau * (self._c1 + tau * self._c2)
        if tau >= self._step_at:
            d += self._step
        if tau >= self._rate_at:
            d += (tau - self._rate_at) * self._rate_step
        return _floor(d / self._tick)

    def now(self) -> int:
        if self._kind == "host":
            return _monotonic_ns()
        if self._kind == "emulated":
            return self._emulated(_monotonic_ns())
        return self._manual

    def ticks_at(self, host: int) -> int:
        if self._kind == "host":
            return int(host)
        if self._kind == "emulated":
            return self._emulated(int(host))
        return self._manual

    def set(self, ticks: int) -> None:
        if self._kind != "manual":
            raise ValueError("only a manual clock can be set")
        if ticks < self._manual:
            raise ValueError("a clock never goes backwards")
        self._manual = int(ticks)

    def advance(self, ticks: int) -> int:
        if self._kind != "manual":
            raise ValueError("only a manual clock can be advanced")
        if ticks < 0:
            raise ValueError("a clock never goes backwards")
        self._manual += int(ticks)
        return self._manual

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def tick_ns(self) -> float:
        return self._tick
