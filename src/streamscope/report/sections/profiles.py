"""The function profiles section, for a run that traced function calls: per stage, its traced
functions (total and self time), and what was left untraced and why.

In: a ``Run`` (``Run.profiles``, ``Run.trace_exclusions``). Out: the section's HTML, or nothing
for a run that traced nothing.
"""

from __future__ import annotations

from streamscope.core.fmt import fmt_ns
from streamscope.report.markup import esc, table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run


class ProfilesSection:
    id = "profiles"
    title = "Profiles"

    def render(self, ctx: Context) -> str:
        return section(ctx.run)


def section(run: Run, top: int = 20) -> str:
    """The section ("" for a run without profiles); ``top`` functions per stage."""
    rows = run.profiles()
    if not rows:
        return ""
    out = ['<section id="profiles"><h2>Function profiles</h2>']
    out.append(
        "<p>Traced function calls per stage (enter and exit of each call): total time "
        "includes callees, self time does not.</p>"
    )
    for stage in dict.fromkeys(r["stage"] for r in rows):
        mine = [r for r in rows if r["stage"] == stage][:top]
        out.append(f"<h3>{esc(stage)}</h3>")
        body = [
            [r["function"], f"{r['calls']:,}", fmt_ns(r["total_ns"]), fmt_ns(r["self_ns"]),
             fmt_ns(r["max_ns"])]
            for r in mine
        ]  # fmt: skip
        out.append(table(["function", "calls", "total", "self", "longest"], body, "ss-profile"))
    excluded = run.trace_exclusions()
    if excluded:
        items = "".join(f"<li>{esc(k)}: {esc(v)}</li>" for k, v in excluded.items())
        out.append(f"<p>Not traced:</p><ul>{items}</ul>")
    out.append("</section>")
    return "".join(out)
