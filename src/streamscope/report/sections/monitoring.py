"""Two sections on the monitoring itself: the probe records it dropped, and what it cost (past
``FAMILY_AT`` stages, a family of numbered ones in one row, its members' costs added).

In: a ``Run`` (``data.total_records``, ``data.drops``, ``Run.overhead``). Out: the sections'
HTML.
"""

from __future__ import annotations

from typing import Any

from streamscope.core.fmt import fmt_ns, pct
from streamscope.report import data as rd
from streamscope.report.families import families
from streamscope.report.markup import table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run


class DropsSection:
    id = "drops"
    title = "Drops"

    def render(self, ctx: Context) -> str:
        return drops_section(ctx.run)


class OverheadSection:
    id = "overhead"
    title = "Overhead"

    def render(self, ctx: Context) -> str:
        return overhead_section(ctx.run)


def drops_section(run: Run) -> str:
    dropped, kept = rd.total_records(run)
    out = ['<section id="drops"><h2>Probe records</h2>']
    if not dropped:
        out.append(f'<p class="muted">No probe record was dropped ({kept:,} kept).</p>')
    else:
        share = dropped / (dropped + kept) if dropped + kept else 0.0
        out.append(
            f"<p>{dropped:,} records were dropped ({pct(share, 1)} of {dropped + kept:,}); "
            "frames that lost records under-count.</p>"
        )
        out.append(table(["probe", "dropped", "kept"], rd.drops(run)))
    out.append("</section>")
    return "".join(out)


def overhead_section(run: Run) -> str:
    rows = _by_family(run.overhead())
    out = ['<section id="overhead"><h2>Monitoring overhead</h2>']
    if not rows:
        out.append('<p class="muted">No probe was active.</p>')
    else:
        events = sum(r["events"] for r in rows)
        seconds = (run.duration_ns or 0) / 1e9
        rate = f" ({events / seconds:,.0f} per second)" if seconds else ""
        out.append(
            f"<p>{events:,} probe events{rate}. Probe time is estimated: each probe's events "
            "times the cost of one event, measured in its process when the run started.</p>"
        )
        body = [
            [
                r["stage"],
                r["probes"],
                f"{r['events']:,}",
                "-" if r["events_per_s"] is None else f"{r['events_per_s']:,.0f}",
                fmt_ns(r["est_probe_ns"]),
                pct(r["fraction"], 1),
            ]
            for r in rows
        ]
        out.append(
            table(["stage", "probes", "events", "events/s", "probe time", "of its time"], body)
        )
    out.append("</section>")
    return "".join(out)


#: The figures of a stage's cost that add up over a family (each is over the whole run).
ADDED = ("probes", "events", "events_per_s", "est_probe_ns", "fraction")


def _by_family(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each stage's cost; past ``FAMILY_AT`` stages, a family's in one row, its members' added,
    costliest first."""
    fams = families([str(r["stage"]) for r in rows])
    if all(len(ms) == 1 for ms in fams.values()):
        return rows
    by = {str(r["stage"]): r for r in rows}
    out = []
    for fam, ms in fams.items():
        if len(ms) == 1:
            out.append(by[ms[0]])
            continue
        row: dict[str, Any] = {"stage": f"{fam} (a family of {len(ms)})"}
        for key in ADDED:
            known = [by[m][key] for m in ms if by[m][key] is not None]
            row[key] = sum(known) if known else None
        out.append(row)
    return sorted(out, key=lambda r: -(r["est_probe_ns"] or 0.0))
