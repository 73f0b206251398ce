"""Two sections on the monitoring itself: the probe records it dropped, and what it cost.

In: a ``Run`` (``data.total_records``, ``data.drops``, ``Run.overhead``). Out: the sections'
HTML.
"""

from __future__ import annotations

from streamscope.core.fmt import fmt_ns, pct
from streamscope.report import data as rd
from streamscope.report.markup import table
from streamscope.store.reader import Run


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
    rows = run.overhead()
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
            table(["stage", "probes", "events", "events/s", "probe time", "of the run"], body)
        )
    out.append("</section>")
    return "".join(out)
