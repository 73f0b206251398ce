"""The shape every section of the report page shares, and what they all read.

In: a ``Run``, the ``Page`` that collects the figures drawn, and the run it is compared with (if
any). Out: ``Context``, made once per page (the run's query series and findings are made once,
on first use, whichever section asks first), and ``ReportSection``: an ``id`` (the page's
anchor), a ``title`` (its name in the navigation bar) and ``render``. ``DEFAULT_SECTIONS`` (in
``sections/__init__``) lists them in the page's order; a new section is a module with one object
of this shape, added there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from streamscope.report.markup import Page

if TYPE_CHECKING:
    from streamscope.analysis import Finding
    from streamscope.analysis.obvious import Predictions
    from streamscope.report.data import QuerySeries
    from streamscope.store.reader import Run

T = TypeVar("T")


class Context:
    """What the sections of one page read (mutable: what they share is made on first use)."""

    def __init__(self, run: Run, page: Page, other: Run | None = None) -> None:
        self.run = run
        self.page = page
        self.other = other
        self._made: dict[str, Any] = {}

    @cached_property
    def series(self) -> Sequence[QuerySeries]:
        """Every query's series (three reads of the run file for the page)."""
        from streamscope.report.data import query_series

        return query_series(self.run)

    @cached_property
    def found(self) -> Sequence[Finding]:
        """The run's findings (two sections read them; with many channels they take long)."""
        from streamscope.analysis import findings

        return findings(self.run)

    @cached_property
    def predictions(self) -> Predictions:
        """What the obvious changes would gain (two sections read it: it simulates)."""
        from streamscope.analysis.obvious import predictions

        return predictions(self.run, self.found)

    def once(self, key: str, make: Callable[[], T]) -> T:
        """What ``make`` gives, made the first time ``key`` is asked for (several sections
        built in one pass: their figures numbered in the page in that pass's order)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]  # type: ignore[no-any-return]


class ReportSection(Protocol):
    """One section of the page."""

    #: Its anchor on the page: its HTML is ``<section id="ID">...</section>``.
    id: str
    #: Its name in the page's navigation bar.
    title: str

    def render(self, ctx: Context) -> str:
        """Its HTML ("" when it has nothing for this run: it is then left off the page)."""
        ...
