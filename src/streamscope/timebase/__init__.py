"""Timebase: clock domains, calibration by round trips, and the tick → virtual-time conversion.

In: raw ticks and round-trip exchanges. Out: host (virtual) ns with hard bounds that hold the truth.
Names are imported when first used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

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

_CALIBRATION = (
    "METHODS", "CalibrationError", "ClockModel", "Exchanges", "Fit", "fit", "fit_hull",
    "fit_timetrial",
)  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        **{n: f"streamscope.timebase.calibration:{n}" for n in _CALIBRATION},
        "ClockMap": "streamscope.timebase.clockmap:ClockMap",
        "HostMap": "streamscope.timebase.clockmap:HostMap",
        "EmulatedClock": "streamscope.timebase.emulated:EmulatedClock",
        "EmulatedClockSpec": "streamscope.timebase.emulated:EmulatedClockSpec",
    },
)

if TYPE_CHECKING:
    from streamscope.timebase.calibration import METHODS as METHODS
    from streamscope.timebase.calibration import CalibrationError as CalibrationError
    from streamscope.timebase.calibration import ClockModel as ClockModel
    from streamscope.timebase.calibration import Exchanges as Exchanges
    from streamscope.timebase.calibration import Fit as Fit
    from streamscope.timebase.calibration import fit as fit
    from streamscope.timebase.calibration import fit_hull as fit_hull
    from streamscope.timebase.calibration import fit_timetrial as fit_timetrial
    from streamscope.timebase.clockmap import ClockMap as ClockMap
    from streamscope.timebase.clockmap import HostMap as HostMap
    from streamscope.timebase.emulated import EmulatedClock as EmulatedClock
    from streamscope.timebase.emulated import EmulatedClockSpec as EmulatedClockSpec
