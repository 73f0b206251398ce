"""The report's first section: what the analysis found, most severe first, each with its
suggestion and evidence; and how the run ended, if not completed.

In: a ``Run``. Out: the section's HTML.
"""

from __future__ import annotations

import json

from streamscope.analysis import findings
from streamscope.report.markup import badge, esc, table
from streamscope.store.reader import Run

SEVERITY_ORDER = {"problem": 0, "warning": 1, "info": 2}


def section(run: Run) -> str:
    fs = sorted(findings(run), key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    out = ['<section id="findings"><h2>Findings</h2>']
    if run.status != "completed":
        why = f": {run.error}" if run.error else ""
        out.append(f'<div class="error">The run is <b>{esc(run.status)}</b>{esc(why)}</div>')
    if not fs:
        out.append('<p class="muted">Nothing stands out in this run.</p>')
    for f in fs:
        sev = f.severity if f.severity in SEVERITY_ORDER else "info"
        out.append(
            f'<div class="finding {sev}" data-kind="{esc(f.kind)}">'
            f'{badge(f.severity, "sev-" + sev)} <span class="title">{esc(f.title)}</span>'
            f' <span class="muted">({esc(f.kind)}{", " + esc(f.target) if f.target else ""})</span>'
            f"<div>{esc(f.detail)}</div>"
        )
        if f.suggestion:
            out.append(f'<div class="suggest">→ {esc(f.suggestion)}</div>')
        if f.evidence:
            rows = [(k, json.dumps(v, default=str)[:300]) for k, v in f.evidence.items()]
            out.append(f"<details><summary>evidence</summary>{table(('', ''), rows)}</details>")
        out.append("</div>")
    out.append("</section>")
    return "".join(out)
