"""Timebase: tick → virtual-time conversion per clock domain."""

from __future__ import annotations

from streamscope.timebase.clockmap import ClockMap, HostMap

__all__ = ["ClockMap", "HostMap"]
