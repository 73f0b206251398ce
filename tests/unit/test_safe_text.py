"""Text from a program or a run file is shown, never acted on: control characters escaped,
printable text of any script as it is; rich's consoles of ours show markup in names as
written, and a plain console (a pipe) escapes as they do."""

from __future__ import annotations

import io
import re
import sys

import pytest
from rich.table import Table
from rich.text import Text

from streamscope.core.safetext import safe_text
from streamscope.report.console import SafeConsole
from streamscope.report.plain import PlainConsole

NAME = "\x1b]0;pwned\x07evil\x1b[2J"
SHOWN = "\\x1b]0;pwned\\x07evil\\x1b[2J"
#: What a terminal acts on, but newline and tab (and carriage return, which rich may write).
ACTED_ON = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    ("text", "shown"),
    [(NAME, SHOWN), ("a\rb\x00c\x7f", "a\\x0db\\x00c\\x7f"), ("\x9b2J", "\\x9b2J"),
     ("abc\u202edef", "abc\\u202edef"), ("two\nlines\tand a tab", "two\nlines\tand a tab"),
     ("café — 東京 ✓ α≤β ±3 \\x1b", "café — 東京 ✓ α≤β ±3 \\x1b")],
)  # fmt: skip
def test_control_characters_are_escaped_and_nothing_else(text: str, shown: str) -> None:
    assert safe_text(text) == shown
    assert safe_text(shown) == shown  # idempotent


def rendered(*objects: object, **kwargs: object) -> str:
    console = SafeConsole(file=io.StringIO(), width=200, color_system=None)
    for o in objects:
        console.print(o, **kwargs)  # type: ignore[arg-type]
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_a_safe_console_shows_names_in_prints_tables_and_texts() -> None:
    table = Table(title=f"of {NAME}", caption=NAME)
    table.add_column(NAME)
    table.add_row(f"[bold]{NAME}[/bold]")
    table.add_row(Text(NAME))  # a Text made elsewhere: made safe as it goes out
    said = rendered(f"stage {NAME} [red]x[/red]", table)
    assert not ACTED_ON.search(said), said
    assert f"stage {SHOWN} [red]x[/red]" in said
    assert f"[bold]{SHOWN}[/bold]" in said and f"of {SHOWN}" in said
    # a Text's own making drops BEL: what is left is still shown, never acted on
    assert "\\x1b]0;pwnedevil\\x1b[2J" in said


def test_markup_is_read_only_where_a_print_asks_for_it() -> None:
    console = SafeConsole(file=io.StringIO(), width=200, force_terminal=True)
    console.print("[bold]x[/bold] :smile:")
    console.print("[bold]y[/bold]", markup=True)
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold]x[/bold] :smile:" in said and "\x1b[1my\x1b[0m" in said


def test_a_plain_console_escapes_as_rich_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    PlainConsole("stderr").print(f"q0 {NAME}: mean=3", markup=False)
    assert sys.stderr.getvalue() == f"q0 {SHOWN}: mean=3\n"  # type: ignore[attr-defined]
    assert rendered(f"q0 {NAME}: mean=3", soft_wrap=True) == sys.stderr.getvalue()  # type: ignore[attr-defined]
