"""Rich's console for text that comes from a program or a run file: every string it shows is
made safe first (``core.safetext``), and none is read as markup or emoji codes unless a print
asks for markup itself.

In: what rich's ``Console`` takes. Out: ``SafeConsole``, a rich ``Console`` on which a name
holding ``ESC ]0;title BEL`` or ``ESC [2J`` prints as ``\\x1b]0;title\\x07`` and ``\\x1b[2J``
(in tables too, their columns as wide as what is shown), and ``[bold]`` as itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from streamscope.core.safetext import UNSAFE, safe_text

__all__ = ["SafeConsole"]


class SafeConsole(Console):
    """A rich ``Console`` that shows what it is given, never acts on it: strings are made safe
    before they are laid out (``render_str``: prints, table cells, titles, captions); what is
    rendered otherwise (a ``Text`` made elsewhere) is made safe as it goes out (``render``).
    Markup, emoji codes and highlighting are off unless a print asks for them (``markup=True``:
    then the values put into that print's text must be ``rich.markup.escape``\\ d)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("markup", False)
        kwargs.setdefault("emoji", False)
        kwargs.setdefault("highlight", False)
        super().__init__(**kwargs)

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: Literal["default", "left", "center", "right", "full"] | None = None,
        overflow: Literal["fold", "crop", "ellipsis", "ignore"] | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: Callable[[str | Text], Text] | None = None,
    ) -> Text:
        return super().render_str(
            safe_text(text), style=style, justify=justify, overflow=overflow, emoji=emoji,
            markup=markup, highlight=highlight, highlighter=highlighter,
        )  # fmt: skip

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterator[Segment]:
        for segment in super().render(renderable, options):
            if segment.control is None and UNSAFE.search(segment.text):
                yield Segment(safe_text(segment.text), segment.style)
            else:
                yield segment
