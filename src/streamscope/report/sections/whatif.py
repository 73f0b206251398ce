"""The "what if" section: what the obvious changes would gain, predicted from this run.

In: a ``Run`` and its findings (``Context.predictions``: the model's self-check and a prediction
for each obvious change: each bottleneck's replicas and speed doubled, each mostly full
channel's capacity doubled). Out: the section's HTML: the self-check in a sentence, then a row
per change (predicted throughput, its interval, the change, what limits the rate then); or why
nothing is predicted (a run without service times, a model that does not reproduce its run).
"""

from __future__ import annotations

from streamscope.report.markup import esc, table
from streamscope.report.sections.base import Context


class WhatIfSection:
    id = "whatif"
    title = "What if"

    def render(self, ctx: Context) -> str:
        pred = ctx.predictions
        if pred.why_not and not pred.rows:
            if pred.no_model:
                return ""  # nothing to model (a program's run): the section is left off
            return (f'<section id="whatif"><h2>What if</h2><p class="muted">{esc(pred.why_not)}'
                    "</p></section>")  # fmt: skip
        out = ['<section id="whatif"><h2>What if</h2>']
        out.append(f"<p>{esc(pred.check)}</p>")
        rows = []
        for w in pred.rows:
            p = w.predicted
            if p is None:
                continue
            gain = w.gain or 0.0
            rows.append([
                ", ".join(c.text for c in w.changes), f"{p.throughput:,.1f}/s",
                f"{p.low:,.1f}–{p.high:,.1f}/s", f"{gain * 100:+.1f} %", p.limit,
            ])  # fmt: skip
        if rows:
            head = ["change", "throughput", "interval (5–95 %)", "gain", "then"]
            out.append(table(head, rows, "ss-whatif"))
        if pred.assumed:
            items = "".join(f"<li>{esc(a)}</li>" for a in pred.assumed)
            out.append(f'<p class="muted">The model assumed:</p><ul class="muted">{items}</ul>')
        out.append(
            '<p class="muted">Predicted with <code>streamscope whatif RUN --set CHANGE</code>: '
            "the pipeline (or program) simulated from this run's service times, its interpreter "
            "locks and "
            "cores, each change's throughput as a ratio to the unchanged model's applied to the "
            "measured rate.</p></section>"
        )
        return "".join(out)
