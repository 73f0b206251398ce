"""Shared CLI plumbing: errors to stderr, lines to stdout, durations from options (values are
formatted by core/fmt.py, as in the report). What these print is made safe for a terminal
(``core.safetext``), as every console of ours does."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import typer

from streamscope.core.errors import ConfigError, QueryError
from streamscope.core.safetext import safe_text
from streamscope.query.units import parse_duration
from streamscope.report.plain import console_for

if TYPE_CHECKING:
    from rich.console import Console

    from streamscope.report.plain import PlainConsole


@functools.cache
def err_console() -> Console | PlainConsole:
    """This process's console on stderr, made when first used (rich only for a terminal)."""
    return console_for("stderr", soft_wrap=True)


def fail(message: str, code: int = 2) -> int:
    err_console().print(f"streamscope: error: {message}", markup=False)
    return code


def echo(line: str) -> None:
    """One line to stdout, as it is but for its control characters (escaped): a line that
    names what a run file holds, or a path."""
    typer.echo(safe_text(line))


def duration_option(text: str, option: str) -> int:
    """An option's duration in ns, or a ConfigError naming the option."""
    try:
        return parse_duration(text)
    except (QueryError, ValueError) as exc:
        msg = getattr(exc, "message", str(exc))
        raise ConfigError(f"bad duration for {option}: {text!r} ({msg})") from None
