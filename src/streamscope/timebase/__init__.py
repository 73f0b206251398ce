"""Timebase: clock domains, calibration by round trips, and the tick → virtual-time conversion.

In: raw ticks and round-trip exchanges. Out: host (virtual) ns with hard bounds that hold the truth.
"""

from __future__ import annotations

from streamscope.timebase.calibration import (
    METHODS,
    CalibrationError,
    ClockModel,
    Exchanges,
    Fit,
    fit,
    fit_hull,
    fit_timetrial,
)
from streamscope.timebase.clockmap import ClockMap, HostMap
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

__all__ = [
    "METHODS",
    "CalibrationError",
    "ClockMap",
    "ClockModel",
    "EmulatedClock",
    "EmulatedClockSpec",
    "Exchanges",
    "Fit",
    "HostMap",
    "fit",
    "fit_hull",
    "fit_timetrial",
]
