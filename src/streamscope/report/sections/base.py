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
        return predictions(self.run, self.found)

    def once(self, key: str, make: Callable[[], T]) -> T:
        """What ``make`` gives, made the first time ``key`` is asked for (several sections
        built in one pass: their figures numbered in the page in that pass's order)."""
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]  # type: ignore[no-any-return]


class Predictions:
    """The what-if predictions of a page: ``rows`` (a ``WhatIf`` per obvious change), ``check``
    (the self-check, a sentence), ``why_not`` (why nothing is predicted; ``no_model``: the run
    has nothing to model), ``assumed``, and ``quote``: the sentence the bottleneck finding
    carries."""

    def __init__(self, rows: Sequence[Any] = (), check: str = "", why_not: str = "",
                 no_model: bool = False, assumed: Sequence[str] = ()) -> None:  # fmt: skip
        self.rows, self.check, self.why_not = list(rows), check, why_not
        self.no_model, self.assumed = no_model, list(assumed)

    def quote(self, target: str) -> str:
        """The first prediction for the unit ``target`` names, in a sentence ("" for none)."""
        for w in self.rows:
            if w.predicted is not None and any(_names(c.target, target) for c in w.changes):
                return str(w.sentence)
        return ""


def _names(pattern: str, label: str) -> bool:
    """Whether a change's target (``walk*``, ``avg``) is the unit a finding names."""
    stem = pattern.rstrip("*")
    return label == pattern or (pattern.endswith("*") and label.startswith(stem))


def predictions(run: Run, found: Sequence[Finding]) -> Predictions:
    from streamscope.analysis.whatif import Predictor, WhatIfError

    try:
        p = Predictor(run)
    except WhatIfError as e:
        no_model = "no service times" in str(e) or "no stages" in str(e)
        return Predictions(why_not=str(e), no_model=no_model)
    c = p.check
    if c.verdict != "consistent":
        return Predictions(
            why_not="The model of this pipeline does not reproduce the run, so it predicts "
            "nothing: " + "; ".join(c.misses) + ".",
            assumed=p.model.assumed,
        )
    check = (f"The pipeline's model reproduces this run: throughput {c.throughput_error:+.1%} "
             f"of the measured {p.model.throughput:,.1f}/s (within {c.allowed:.0%}), every "
             "stage's busy share and channel's occupancy within their tolerances.")  # fmt: skip
    try:
        rows = p.obvious(run, found)
    except WhatIfError as e:
        return Predictions(check=check, why_not=str(e), assumed=p.model.assumed)
    return Predictions(rows, check, assumed=p.model.assumed)


class ReportSection(Protocol):
    """One section of the page."""

    #: Its anchor on the page: its HTML is ``<section id="ID">...</section>``.
    id: str
    #: Its name in the page's navigation bar.
    title: str

    def render(self, ctx: Context) -> str:
        """Its HTML ("" when it has nothing for this run: it is then left off the page)."""
        ...
