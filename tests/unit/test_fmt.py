"""One formatter for the terminal and the report: the same value reads the same in both."""

from __future__ import annotations

import pytest

from streamscope.core import fmt
from streamscope.report import markup as html
from streamscope.report import terminal as live


@pytest.mark.parametrize(
    ("ns", "text"),
    [(1_500_000, "1.5ms"), (820_000, "820us"), (2.1e9, "2.1s"), (45, "45ns"), (None, "-"),
     (float("nan"), "-"), (float("inf"), "-"), (-3_000, "-3us")],
)  # fmt: skip
def test_durations_read_as_queries_write_them(ns: float | None, text: str) -> None:
    assert fmt.fmt_ns(ns) == text


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [(1349.2, "items/s", "1,349/s"), (12.5, "items/s", "12.5/s"), (16.0, "items", "16"),
     (15.87, "items", "15.9"), (1234567, "items", "1,234,567"), (0.25, "state", "0.25"),
     (None, "items", "-"), (2_500_000, "ns", "2.5ms")],
)  # fmt: skip
def test_values_read_the_same_in_their_unit(value: float | None, unit: str, text: str) -> None:
    assert fmt.fmt_value(value, unit) == text


def test_the_terminal_and_the_report_share_the_formatter() -> None:
    assert html.fmt_ns is fmt.fmt_ns and live.fmt_ns is fmt.fmt_ns
    assert html.fmt is fmt.fmt_num and live.fmt_value is fmt.fmt_value
