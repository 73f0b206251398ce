"""Three sections over the run's queries: each query's figures per frame, the histograms of
those that asked for one, and the box-whisker plots of those that asked for ``box``. A query
with more than ``FAMILY_AT`` targets shows one series per family of them (``families``).

In: every query's series (``data.query_series``) and the page that collects figures. Out: the
three sections' HTML.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamscope.core.fmt import fmt_ns
from streamscope.core.topology import FAMILY_AT
from streamscope.report.data import QuerySeries
from streamscope.report.families import grouped
from streamscope.report.figures.queries import (
    box,
    clock_stats,
    duty,
    has_box,
    histograms,
    timeseries,
)
from streamscope.report.markup import Page, esc
from streamscope.report.sections.base import Context

NO_BOX = (
    '<p class="muted">No query asked for a box summary (add <code>box</code> to a '
    "latency query: <code>latency(a -&gt; b): box</code>).</p>"
)


class _Part:
    """One of the three sections, all made in one pass over the queries (``sections``)."""

    def __init__(self, anchor: str, title: str, index: int) -> None:
        self.id, self.title, self._index = anchor, title, index

    def render(self, ctx: Context) -> str:
        return ctx.once("queries", lambda: sections(ctx.page, ctx.series))[self._index]


QUERIES = _Part("queries", "Queries", 0)
HISTOGRAMS = _Part("histograms", "Histograms", 1)
LATENCY = _Part("latency", "Latency", 2)


def sections(page: Page, qs: Sequence[QuerySeries]) -> tuple[str, str, str]:
    """The per-query, histogram and box-whisker sections."""
    main = ['<section id="queries"><h2>Queries per frame</h2>']
    hist = ['<section id="histograms"><h2>Histograms</h2>']
    boxes = ['<section id="latency"><h2>Latency box-whisker plots</h2>']
    if not qs:
        main.append('<p class="muted">The run has no queries.</p>')
    for q in qs:
        shown = grouped(q)
        main.append(_per_frame(page, shown, len(q.targets)))
        hist.append(_histograms(page, shown))
        boxes.append(_box(page, shown, q))
    if not any(hist[1:]):
        hist.append('<p class="muted">No query asked for a histogram.</p>')
    if not any(boxes[1:]):
        boxes.append(NO_BOX)
    for part in (main, hist, boxes):
        part.append("</section>")
    return "".join(main), "".join(hist), "".join(boxes)


def _title(q: QuerySeries) -> str:
    return f"<h3>q{q.id}: <code>{esc(q.text)}</code></h3>"


def _per_frame(page: Page, q: QuerySeries, targets: int) -> str:
    """The query's heading and its figures per frame (a stage's states, every stat, its
    clocks' uncertainty); ``targets``: how many it had before families were taken together."""
    frames = max((len(t.frames) for t in q.targets), default=0)
    names = [t.target if t.members == 1 else f"{t.target} (a family of {t.members})"
             for t in q.targets]  # fmt: skip
    out = (
        f'<h3 id="q{q.id}">q{q.id}: <code>{esc(q.text)}</code></h3>'
        f'<p class="muted">{esc(q.metric)} in {esc(q.unit)}, frames of '
        f"{esc(fmt_ns(q.frame_ns))}; {frames} frames; targets: "
        f"{esc(', '.join(names) or '-')}</p>"
    )
    if len(q.targets) < targets:
        out += _family_note(targets, len(q.targets))
    plots = []
    if q.metric == "state":
        plots += [page.plot(duty(q, ts), f"q{q.id} duty {ts.target}") for ts in q.targets]
    plots.append(page.plot(timeseries(q), f"q{q.id} per frame"))
    plots.append(page.plot(clock_stats(q), f"q{q.id} clock"))
    plots = [p for p in plots if p]
    if plots:
        return out + f'<div class="plots">{"".join(plots)}</div>'
    return out + '<p class="muted">No frames with data.</p>'


def _histograms(page: Page, q: QuerySeries) -> str:
    """The query's histograms, if it has any ("" if not)."""
    hs = histograms(q)
    if not hs:
        return ""
    divs = "".join(page.plot(h, f"q{q.id} histogram") for h in hs)
    return f'{_title(q)}<div class="plots">{divs}</div>'


def _family_note(targets: int, shown: int) -> str:
    return (
        f'<p class="muted ss-families">Its {targets} targets are more than {FAMILY_AT}: each '
        "family of those numbered alike (<code>#2</code>, <code>#3</code>, ...) is shown as one "
        f"({shown} in all). Per frame, a family's mean is its members' each on "
        "average (weighted by the time each observed), its max the largest, its histogram "
        "their weights added, a stage family's time in each state the average of its workers; "
        "quantiles are left out (those of several do not add up). Each target's own are in the "
        "run file's <code>stat</code> and <code>histogram</code> tables.</p>"
    )


def _box(page: Page, q: QuerySeries, asked: QuerySeries) -> str:
    """The query's box-whisker plot, if it has one ("" if not); where its targets asked for
    one but are shown by family, why there is none."""
    b = box(q)
    if b is None:
        if q is not asked and any(has_box(t) for t in asked.targets):
            return _title(q) + (
                f'<p class="muted">No box per family: its {len(asked.targets)} targets are '
                "shown by family, and their quantiles do not add up to a family's.</p>"
            )
        return ""
    return _title(q) + page.plot(b, f"q{q.id} box")
