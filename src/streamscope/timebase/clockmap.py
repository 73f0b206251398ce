"""The one place where raw ticks become virtual nanoseconds.

In: raw ticks of one clock domain (int64 arrays). Out: int64 nanoseconds of virtual time,
relative to the run's start. Calibrated, piecewise maps for other domains plug in here.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
from numpy.typing import NDArray


class ClockMap(Protocol):
    """Maps one domain's ticks to virtual ns since the run started."""

    def to_ns(self, ticks: NDArray[np.int64]) -> NDArray[np.int64]: ...

    def scalar_to_ns(self, ticks: int) -> int: ...


class HostMap:
    """The host domain: ticks are monotonic nanoseconds, so only the run's start is subtracted."""

    __slots__ = ("t0_ticks",)

    def __init__(self, t0_ticks: int) -> None:
        self.t0_ticks = t0_ticks

    def to_ns(self, ticks: NDArray[np.int64]) -> NDArray[np.int64]:
        return ticks - np.int64(self.t0_ticks)

    def scalar_to_ns(self, ticks: int) -> int:
        if ticks >= np.iinfo(np.int64).max:
            return ticks
        return ticks - self.t0_ticks
