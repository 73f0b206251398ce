"""Shared CLI plumbing: errors to stderr, durations from options, value formatting."""

from __future__ import annotations

import math

from rich.console import Console

from streamscope.core.errors import ConfigError, QueryError
from streamscope.query.units import parse_duration

err_console = Console(stderr=True, highlight=False, soft_wrap=True)


def fail(message: str, code: int = 2) -> int:
    err_console.print(f"streamscope: error: {message}", markup=False)
    return code


def duration_option(text: str, option: str) -> int:
    """An option's duration in ns, or a ConfigError naming the option."""
    try:
        return parse_duration(text)
    except (QueryError, ValueError) as exc:
        msg = getattr(exc, "message", str(exc))
        raise ConfigError(f"bad duration for {option}: {text!r} ({msg})") from None


def fmt_ns(ns: float | None) -> str:
    """Nanoseconds in the unit that reads best."""
    if ns is None or (isinstance(ns, float) and math.isnan(ns)):
        return "-"
    a = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if a >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns:.3g}ns"


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "ns":
        return fmt_ns(value)
    if unit == "items/s":
        return f"{value:,.1f}/s"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.3g}"
