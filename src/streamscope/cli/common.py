"""Shared CLI plumbing: errors to stderr, durations from options (values are formatted by
core/fmt.py, as in the report)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from streamscope.core.errors import ConfigError, QueryError
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


def duration_option(text: str, option: str) -> int:
    """An option's duration in ns, or a ConfigError naming the option."""
    try:
        return parse_duration(text)
    except (QueryError, ValueError) as exc:
        msg = getattr(exc, "message", str(exc))
        raise ConfigError(f"bad duration for {option}: {text!r} ({msg})") from None
