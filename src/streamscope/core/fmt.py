"""How numbers and durations read, the same in the terminal and in the report.

In: a value and its unit (``ns``, ``items/s``, ``items``, ...). Out: short text: durations in
the unit that reads best, written as queries write them (``1.5ms``, ``820us``, ``2.1s``), three
significant digits; counts and large values with thousands separators (``1,349``), rates per
second (``1,349/s``, ``12.5/s``), fractions as percentages (``93 %``); ``-`` for what is
missing or not finite.
"""

from __future__ import annotations

import math

__all__ = ["fmt_ns", "fmt_num", "fmt_value", "pct"]


def fmt_ns(ns: float | None) -> str:
    """Nanoseconds in the unit that reads best: ``1.5ms``, ``820us``, ``2.1s``, ``45ns``."""
    if ns is None or not math.isfinite(ns):
        return "-"
    a = abs(ns)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if a >= scale:
            return f"{ns / scale:.3g}{unit}"
    return f"{ns:.3g}ns"


def fmt_num(x: object, digits: int = 3) -> str:
    """A count or a measure: ``1,234`` for whole numbers and anything of 1000 or more, else
    ``digits`` significant digits; ``yes``/``no`` for booleans; text as it is."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return f"{x:,}"
    if isinstance(x, float):
        if not math.isfinite(x):
            return "-"
        if (x.is_integer() and abs(x) < 1e15) or 1e3 <= abs(x) < 1e15:
            return f"{round(x):,}"
        return f"{x:.{digits}g}"
    return str(x)


def fmt_value(value: float | None, unit: str) -> str:
    """A query's value in its unit: a duration, a rate per second, or a number."""
    if value is None:
        return "-"
    if unit == "ns":
        return fmt_ns(value)
    if unit == "items/s":
        return f"{fmt_num(float(value))}/s"
    return fmt_num(float(value))


def pct(x: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: ``0.934`` → ``'93 %'`` (``digits`` after the point);
    ``-`` for ``None`` or what is not finite."""
    if x is None or not math.isfinite(x):
        return "-"
    return f"{x * 100:.{digits}f} %"
