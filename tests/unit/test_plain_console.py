"""A console for a stream that is not a terminal writes what rich would there, without rich."""

from __future__ import annotations

import io
import os
import sys

import pytest
from rich.console import Console

from streamscope.report.plain import FORCING, PlainConsole, console_for


@pytest.fixture
def no_forcing(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in FORCING:
        monkeypatch.delenv(key, raising=False)


@pytest.mark.usefixtures("no_forcing")
def test_a_stream_that_is_no_terminal_gets_plain_lines_as_rich_writes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    plain = console_for("stderr")
    assert isinstance(plain, PlainConsole)
    rich = Console(highlight=False, stderr=True, soft_wrap=True)
    for line in ("streamscope: run failed: boom [b]x[/b]", "[  1.0s] q1 a -> b: mean=3 items"):
        plain.print(line, markup=False, highlight=False, soft_wrap=True)
        rich.print(line, markup=False, highlight=False)
    said = sys.stderr.getvalue().splitlines()  # type: ignore[attr-defined]
    assert said[0::2] == said[1::2] and len(said) == 4
    # What the monitor is told to write for it: rich's own reading of the same stream.
    assert (plain.width, plain.color_system, plain.is_terminal) == (
        rich.width,
        rich.color_system,
        rich.is_terminal,
    )


@pytest.mark.usefixtures("no_forcing")
def test_the_width_is_columns_where_it_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "97")
    assert PlainConsole("stdout").width == 97 == Console(file=io.StringIO()).width


@pytest.mark.parametrize("key", FORCING)
def test_a_stream_rich_would_treat_as_a_terminal_gets_rich(
    key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    monkeypatch.setenv(key, "1")
    assert isinstance(console_for("stderr"), Console)


def test_a_terminal_gets_rich(monkeypatch: pytest.MonkeyPatch) -> None:
    r, w = os.openpty()
    try:
        with open(w, "w", closefd=False) as tty:
            monkeypatch.setattr(sys, "stdout", tty)
            assert isinstance(console_for("stdout"), Console)
    finally:
        os.close(r)
        os.close(w)
