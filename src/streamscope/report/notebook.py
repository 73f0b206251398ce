"""A run as a notebook shows it: its findings, its pipeline graph (states and occupancy) and its
stages' and channels' tables, as one HTML fragment whose styles touch nothing outside it.

In: a loaded ``Run``, or a run's result (its file or in-memory store). Out: ``run_html``, the
fragment (the report's sections, without the report's page, plots or scripts), and
``result_html``, a result's.
"""

from __future__ import annotations

import re
from typing import Any

from streamscope.analysis.findings import findings
from streamscope.core.fmt import fmt_ns
from streamscope.report.html import CSS
from streamscope.report.markup import esc
from streamscope.report.sections import findings as findings_section
from streamscope.report.sections import pipeline as pipeline_section
from streamscope.store.reader import Run, load

#: The class of the fragment's outer element: every style rule is scoped under it.
ROOT = "ss-nb"
#: The report's rules for its page (body, header, navigation): not a fragment's.
_PAGE = re.compile(r"^(\*|body|header|nav|main)\b")


def run_html(run: Run) -> str:
    """The fragment: a line naming the run, its findings, its pipeline."""
    found = findings(run)
    duration = fmt_ns(run.duration_ns) if run.duration_ns else "-"
    head = (f'<div class="ss-nb-head"><b>{esc(run.meta.name)}</b> '
            f"({esc(run.status)}, {esc(duration)})</div>")  # fmt: skip
    return (
        f'<div class="{ROOT}"><style>{scoped_css(CSS)}</style>{head}'
        f"{findings_section.section(run, found)}{pipeline_section.section(run, found)}</div>"
    )


def scoped_css(css: str) -> str:
    """``css``'s rules with each selector under ``.ROOT`` and the page's own rules left out."""
    out = []
    for selectors, body in re.findall(r"([^{}]+)\{([^{}]*)\}", css):
        kept = [s.strip() for s in selectors.split(",") if not _PAGE.match(s.strip())]
        if kept:
            out.append(",".join(f".{ROOT} {s}" for s in kept) + "{" + body.strip() + "}")
    return "\n".join(out)


def result_html(result: Any) -> str:
    """A finished run's fragment (a ``RunResult``), read back from its file (``path``) or its
    in-memory ``store``."""
    if result.path is not None:
        with load(result.path) as run:
            return run_html(run)
    if result.store is not None:
        with Run.from_memory(result.store) as run:
            return run_html(run)
    return f"<p>run {esc(str(result.status))}: {esc(result.error or 'nothing recorded')}</p>"
