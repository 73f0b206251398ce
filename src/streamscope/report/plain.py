"""A console for a stream that is not a terminal, without loading rich (some 20 ms of a
command's start): what a run says there is plain lines, as rich would write them.

In: the standard stream to write to. Out: ``console_for(stream)``, a rich ``Console`` (our
``SafeConsole``) where the stream is a terminal or rich would treat it as one (``FORCE_COLOR``,
``TTY_COMPATIBLE``, ``TTY_INTERACTIVE``), else a ``PlainConsole`` of the same width, colour
system (none) and ``is_terminal`` (False) as rich's. Both show control characters in what they
print as escapes (``core.safetext``): a stream that is no terminal now may be one later.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Literal, TextIO

from streamscope.core.safetext import safe_text

if TYPE_CHECKING:
    from rich.console import Console

#: What makes rich treat a stream that is not a terminal as one, or ask for its colours.
FORCING = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE")


class PlainConsole:
    """``rich.console.Console``'s part that a run's command uses, for a stream that is not a
    terminal: lines written as they are (rich writes no styles there, and its ``soft_wrap``
    lines unbroken; these are never broken, a path included), control characters escaped."""

    is_terminal = False
    color_system: str | None = None

    def __init__(self, stream: Literal["stdout", "stderr"]) -> None:
        self._stream = stream

    @property
    def file(self) -> TextIO:
        """The stream as it is now (as rich's: a test's capture replaces it)."""
        return sys.stderr if self._stream == "stderr" else sys.stdout

    @property
    def width(self) -> int:
        """Rich's width for a stream that is not a terminal: the first standard stream's that
        is one, else ``COLUMNS``, else 80."""
        width = 0
        for fd in (0, 1, 2):
            try:
                width = os.get_terminal_size(fd).columns
            except (AttributeError, ValueError, OSError):
                continue
            break
        columns = os.environ.get("COLUMNS", "")
        return int(columns) if columns.isdigit() else (width or 80)

    def rich(self) -> Console:
        """Rich's console for the same stream, to render its tables (as plain as this)."""
        from streamscope.report.console import SafeConsole

        return SafeConsole(stderr=self._stream == "stderr")

    def print(self, *objects: object, sep: str = " ", end: str = "\n", **_: object) -> None:
        self.file.write(safe_text(sep.join(str(o) for o in objects)) + end)


def console_for(
    stream: Literal["stdout", "stderr"], *, soft_wrap: bool = False
) -> Console | PlainConsole:
    """A console writing to ``stream``: rich's where it may show styles or a live view (its
    lines wrapped at its width unless ``soft_wrap``), plain where it would write plain lines."""
    file = sys.stderr if stream == "stderr" else sys.stdout
    try:
        tty = file.isatty()
    except (AttributeError, ValueError):
        tty = False
    if tty or any(k in os.environ for k in FORCING):
        from streamscope.report.console import SafeConsole

        return SafeConsole(stderr=stream == "stderr", soft_wrap=soft_wrap)
    return PlainConsole(stream)


__all__ = ["FORCING", "PlainConsole", "console_for"]
