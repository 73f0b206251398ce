"""Durations and numbers as query text: ``"500ms"`` in, integer nanoseconds out, and back.

Printing picks the largest unit that holds the value exactly, so printed text parses back equal.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation

from streamscope.core.errors import QueryError

#: Nanoseconds per unit. ``µs`` (micro sign) and ``μs`` (Greek mu) are spellings of ``us``.
UNIT_NS: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
}

#: Units the printer uses, largest first (ASCII spellings only).
_PRINT_UNITS: tuple[tuple[str, int], ...] = (
    ("m", UNIT_NS["m"]),
    ("s", UNIT_NS["s"]),
    ("ms", UNIT_NS["ms"]),
    ("us", UNIT_NS["us"]),
    ("ns", UNIT_NS["ns"]),
)

DURATION_HINT = "use a number with ns, us, ms, s or m"

_DURATION_RE = re.compile(r"\s*(\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*([A-Za-z\u00b5\u03bc]*)\s*")


class DurationError(ValueError):
    """A duration that is malformed, not positive or not a whole number of nanoseconds."""


def to_ns(number: str, unit: str) -> int:
    """``number`` (decimal text) times ``unit`` as whole nanoseconds.

    Raises :class:`DurationError` for an unknown unit or a fraction of a nanosecond.
    """
    if unit not in UNIT_NS:
        raise DurationError(DURATION_HINT)
    try:
        exact = Decimal(number) * UNIT_NS[unit]
    except InvalidOperation:
        raise DurationError(DURATION_HINT) from None
    if not exact.is_finite() or abs(exact) >= 2**63:
        raise DurationError("too large: durations go up to 2^63 - 1 ns (about 292 years)")
    if exact != exact.to_integral_value():
        raise DurationError("must be a whole number of nanoseconds")
    return int(exact)


def parse_duration(text: str | int) -> int:
    """A positive duration as integer nanoseconds: ``"1s"``, ``"1.5ms"``, ``"100 us"``.

    An ``int`` is taken as nanoseconds already. Raises :class:`DurationError` with a hint.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        ns = text
    elif isinstance(text, str):
        match = _DURATION_RE.fullmatch(text)
        if match is None or not match.group(2):
            raise DurationError(DURATION_HINT)
        ns = to_ns(match.group(1), match.group(2))
    else:
        raise DurationError(DURATION_HINT)
    if ns <= 0:
        raise DurationError("must be greater than zero")
    return ns


def format_duration(ns: int) -> str:
    """``ns`` in the largest unit that holds it exactly: 1_500_000 → ``"1500us"``, 0 → ``"0"``."""
    if ns == 0:
        return "0"
    for unit, size in _PRINT_UNITS:
        if ns % size == 0:
            return f"{ns // size}{unit}"
    raise AssertionError("unreachable: every integer is a whole number of ns")


def format_number(value: float) -> str:
    """Shortest plain decimal text that reads back as the same float: 50.0 → ``"50"``.

    Never uses an exponent, so ``p`` shorthands and edges print as the user would write them.
    """
    if isinstance(value, int):
        return str(value)
    if not math.isfinite(value):
        raise ValueError(f"not a finite number: {value!r}")
    text = format(Decimal(repr(float(value))), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def duration_ns(duration: str | int) -> int:
    """:func:`parse_duration` for user input: a :class:`QueryError` that quotes the input."""
    try:
        return parse_duration(duration)
    except DurationError as e:
        raise QueryError(f"bad duration '{duration}': {e}") from None


def parse_value(value: float | str, time_valued: bool) -> float:
    """A histogram argument from Python: a number, or for time-valued metrics a duration text
    (``"10ms"``) or nanoseconds. Time values come back as ``int`` nanoseconds."""
    if isinstance(value, str):
        if not time_valued:
            raise QueryError(f"bad value '{value}': this metric takes plain numbers")
        match = _DURATION_RE.fullmatch(value)
        if match is None:
            raise QueryError(f"bad duration '{value}': {DURATION_HINT}")
        try:
            return to_ns(match.group(1), match.group(2) or "ns")
        except DurationError as e:
            raise QueryError(f"bad duration '{value}': {e}") from None
    if time_valued and float(value).is_integer():
        return int(value)
    return value
