"""Clocks: raw tick sources tagged with a domain name and a nominal tick period.

Only ``timebase`` turns ticks into virtual nanoseconds; everything else keeps raw ticks.
"""

from __future__ import annotations

import time
from typing import Protocol, runtime_checkable

from streamscope.core.topology import HOST


@runtime_checkable
class Clock(Protocol):
    """A counter with a nominal period. ``now_ticks`` must be cheap and monotonic."""

    @property
    def domain(self) -> str: ...

    @property
    def tick_period_ns(self) -> float: ...

    def now_ticks(self) -> int: ...


#: The host clock's reading as a bare function: what hot paths call (no attribute lookups).
host_now_ticks = time.monotonic_ns


class HostClock:
    """The host's monotonic nanosecond clock (CLOCK_MONOTONIC; shared by all local processes)."""

    __slots__ = ()

    domain = HOST
    tick_period_ns = 1.0

    def now_ticks(self) -> int:
        return time.monotonic_ns()


class FakeClock:
    """A manually advanced clock for deterministic tests."""

    __slots__ = ("_ticks", "domain", "tick_period_ns")

    def __init__(
        self, start: int = 0, *, domain: str = "fake", tick_period_ns: float = 1.0
    ) -> None:
        self._ticks = start
        self.domain = domain
        self.tick_period_ns = tick_period_ns

    def now_ticks(self) -> int:
        return self._ticks

    def advance(self, ticks: int) -> int:
        """Move forward by ``ticks`` (never backwards) and return the new reading."""
        if ticks < 0:
            raise ValueError("a clock never goes backwards")
        self._ticks += ticks
        return self._ticks

    def set(self, ticks: int) -> None:
        if ticks < self._ticks:
            raise ValueError("a clock never goes backwards")
        self._ticks = ticks
