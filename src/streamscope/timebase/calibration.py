"""Clock calibration: round-trip bursts (host t1, device t2, host t3) in, tick → host-ns maps out.

``fit`` turns one burst into a linear ``Fit`` with hard bounds; ``ClockModel`` joins a run's fits.
"""

from __future__ import annotations

from streamscope.timebase.burst import (
    METHODS,
    CalibrationError,
    Exchanges,
    Fit,
    fit,
    fit_hull,
    fit_timetrial,
)
from streamscope.timebase.piecewise import ClockModel

__all__ = [
    "METHODS",
    "CalibrationError",
    "ClockModel",
    "Exchanges",
    "Fit",
    "fit",
    "fit_hull",
    "fit_timetrial",
]
