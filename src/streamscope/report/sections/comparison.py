"""The comparison section: whether the other run is faster, then every compared number of the
two runs, with its verdict.

In: two ``Run``s (``analysis.compare``) and the page that collects figures. Out: the section's
HTML.
"""

from __future__ import annotations

import json

from streamscope.analysis import compare
from streamscope.report.figures.comparison import compare_bars
from streamscope.report.markup import Page, esc, table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run

#: The table's first columns; any others the rows have follow, by name.
FIRST = ["query", "target", "stat", "a", "b", "delta", "verdict"]


class ComparisonSection:
    id = "compare"
    title = "Comparison"

    def render(self, ctx: Context) -> str:
        """The comparison with the other run ("" without one)."""
        return "" if ctx.other is None else section(ctx.page, ctx.run, ctx.other)


def section(page: Page, run: Run, other: Run) -> str:
    d = compare(run, other).to_dict()
    out = ['<section id="compare"><h2>Comparison</h2>']
    headline = d.get("headline")
    if headline:  # first: is the other run faster?
        out.append(f'<p class="ss-compare-headline"><b>{esc(headline)}</b></p>')
    out.append(
        f"<p>This run (a): <b>{esc(run.meta.name)}</b> ({esc(run.path or run.meta.run_id)}); "
        f"other run (b): <b>{esc(other.meta.name)}</b> ({esc(other.path or other.meta.run_id)})</p>"
    )
    summary = d.get("summary")
    if summary:
        out.append(f'<p class="ss-compare-summary"><b>{esc(summary)}</b></p>')
    rows = [r for r in d.get("rows", []) if isinstance(r, dict)]
    if rows:
        out.append(page.plot(compare_bars(rows), "compare"))
        keys = FIRST + sorted({k for r in rows for k in r} - set(FIRST))
        out.append(table(keys, [[r.get(k) for k in keys] for r in rows], "ss-compare"))
    else:
        out.append('<p class="muted">Nothing in common to compare.</p>')
    rest = {k: v for k, v in d.items() if k not in ("rows", "summary", "headline")}
    if rest:
        blob = json.dumps(rest, indent=1, default=str)
        out.append(f"<details><summary>details</summary><pre>{esc(blob)}</pre></details>")
    out.append("</section>")
    return "".join(out)
