"""The report's first section: what the analysis found, most severe first, each with its
suggestion and evidence; and how the run ended, if not completed. Findings of one kind about
members of one family (``maker -> taker``, ``maker -> taker #2``, ...) are one: the first in
full, then how many more are like it and about which members.

In: a ``Run`` and its findings. Out: the section's HTML.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from streamscope.analysis import Finding
from streamscope.analysis.context import SEVERITY_ORDER
from streamscope.core.topology import family
from streamscope.report.families import numbers
from streamscope.report.markup import badge, esc, table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run


class FindingsSection:
    id = "findings"
    title = "Findings"

    def render(self, ctx: Context) -> str:
        bottlenecks = [f for f in ctx.found if f.kind == "bottleneck"]
        quotes = {f.target: ctx.predictions.quote(f.target) for f in bottlenecks}
        advice = {f.target: ctx.predictions.advice(f) for f in bottlenecks}
        return section(ctx.run, ctx.found, quotes, advice)


def section(
    run: Run, found: Sequence[Finding], quotes: dict[str, str] | None = None,
    advice: dict[str, str] | None = None,
) -> str:  # fmt: skip
    """The section, from the run's findings ``found``; ``quotes``: a bottleneck's predicted
    gain (``whatif``), and ``advice``: what to do about it in the light of the predictions
    (``Predictions.advice``), by the unit it names."""
    fs = sorted(found, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    out = ['<section id="findings"><h2>Findings</h2>']
    if run.status != "completed":
        why = f": {run.error}" if run.error else ""
        out.append(f'<div class="error">The run is <b>{esc(run.status)}</b>{esc(why)}</div>')
    if not fs:
        out.append('<p class="muted">Nothing stands out in this run.</p>')
    for f, alike in _alike(fs):
        neck = f.kind == "bottleneck"
        out.append(_finding(f, alike, (quotes or {}).get(f.target, "") if neck else "",
                            (advice or {}).get(f.target, f.suggestion) if neck else f.suggestion))  # fmt: skip
    out.append("</section>")
    return "".join(out)


def _alike(fs: Sequence[Finding]) -> list[tuple[Finding, list[Finding]]]:
    """Each finding with the later ones of its kind and severity whose subjects are other
    members of its subject's family, in the order of the first of each."""
    groups: dict[tuple[str, str, str], tuple[list[Finding], set[str]]] = {}
    out: list[list[Finding]] = []
    for f in fs:
        key = (f.kind, f.severity, family(f.target))
        group, subjects = groups.get(key, ([], set()))
        if not f.target or not group or f.target in subjects:
            # about the whole run, the first of its family, or another about the same subject
            group, subjects = [f], {f.target}
            out.append(group)
            if f.target:
                groups[key] = (group, subjects)
        else:
            group.append(f)
            subjects.add(f.target)
    return [(g[0], g[1:]) for g in out]


def _finding(f: Finding, alike: Sequence[Finding], quote: str = "", advice: str = "") -> str:
    sev = f.severity if f.severity in SEVERITY_ORDER else "info"
    fam = family(f.target)
    more = f' data-family="{esc(fam)}" data-more="{len(alike)}"' if alike else ""
    out = [
        f'<div class="finding {sev}" data-kind="{esc(f.kind)}"{more}>'
        f'{badge(f.severity, "sev-" + sev)} <span class="title">{esc(f.title)}</span>'
        f' <span class="muted">({esc(f.kind)}{", " + esc(f.target) if f.target else ""})</span>'
        f"<div>{esc(f.detail)}</div>"
    ]
    if advice:
        out.append(f'<div class="suggest">→ {esc(advice)}</div>')
    if quote and advice == f.suggestion:  # (advice that is not quotes it already)
        out.append(f'<div class="whatif">What if: {esc(quote)} '
                   '<a href="#whatif">(more)</a></div>')  # fmt: skip
    if f.evidence:
        rows = [(k, json.dumps(v, default=str)[:300]) for k, v in f.evidence.items()]
        out.append(f"<details><summary>evidence</summary>{table(('', ''), rows)}</details>")
    if alike:  # the rest named, not repeated: a program's thousand queues alike
        out.append(
            f'<details class="ss-alike"><summary>and {len(alike)} more like it on the family '
            f"<b>{esc(fam)}</b></summary>"
            f'<div class="mono">{esc(numbers([a.target for a in alike]))}</div></details>'
        )
    out.append("</div>")
    return "".join(out)
