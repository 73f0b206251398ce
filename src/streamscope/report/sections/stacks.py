"""The "where the time goes" section: a flame graph per stage from its sampled stacks, the
bottleneck's open first, with its hot functions in a line.

In: a ``Run`` (its ``stacks`` table) and its findings (``Context.found``: which stage limits the
rate). Out: the section's HTML, or nothing for a run whose stacks were not sampled.
"""

from __future__ import annotations

from streamscope.analysis.hotspots import stack_rows, summarize, time_split
from streamscope.core.fmt import pct
from streamscope.report.figures.flame import flame_svg, flame_tree, fold_trunk
from streamscope.report.markup import esc
from streamscope.report.sections.base import Context


class StacksSection:
    id = "stacks"
    title = "Where the time goes"

    def render(self, ctx: Context) -> str:
        rows = stack_rows(ctx.run)
        hot = summarize(rows)
        if not hot:
            return ""
        limiting = _limiting(ctx)
        order = sorted(hot, key=lambda s: (s not in limiting, -hot[s].busy_ns, s))
        out = [
            '<section id="stacks"><h2>Where the time goes</h2>',
            "<p>Each stage's Python stacks, sampled while the run went on: each box is a "
            "function, above the one that called it, as wide as the share of the stage's busy "
            "time spent in it (hover for the figures). <i>[waiting]</i> is time the stage was "
            "busy but not running: asleep, on I/O or a lock (the interpreter's included), or "
            "an asyncio task awaiting.</p>",
        ]
        for i, stage in enumerate(order):
            s = hot[stage]
            mine = [(state, stack, ns) for st, state, stack, _, ns in rows if st == stage]
            svg = flame_svg(fold_trunk(flame_tree(stage, mine)), f"ss-flame-{i}")
            tag = " (limits the rate)" if stage in limiting else ""
            head = (f"<b>{esc(stage)}</b>{esc(tag)}: {esc(time_split(s))} "
                    f'<span class="muted">({s.busy_samples:,} busy samples, '
                    f"{pct(s.running)} running)</span>")  # fmt: skip
            opened = " open" if i == 0 else ""
            out.append(
                f'<details class="ss-flame-stage" data-stage="{esc(stage)}"{opened}>'
                f'<summary>{head}</summary><div class="flame-wrap">{svg}</div></details>'
            )
        out.append("</section>")
        return "".join(out)


def _limiting(ctx: Context) -> set[str]:
    """The stages the bottleneck findings name (a group's members too)."""
    out: set[str] = set()
    for f in ctx.found:
        if f.kind == "bottleneck":
            out.add(f.target)
            out.update(str(m) for m in f.evidence.get("members", ()))
    return out
