"""The clock domains section: each calibrated domain's fit per burst (rate, bounds, residuals)
and its figures: the fits, and every round trip when few enough to draw.

In: a ``Run`` (``data.clock_domains``) and the page that collects figures. Out: the section's
HTML.
"""

from __future__ import annotations

from streamscope.core.fmt import fmt_ns
from streamscope.core.fmt import fmt_num as fmt
from streamscope.report import data as rd
from streamscope.report.figures.clocks import clock_exchanges, clock_fits
from streamscope.report.markup import Page, esc, table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run

INTRO = (
    '<p class="muted">Each domain is calibrated by bursts of round trips (host time before '
    "the request t1, the domain's counter t2, host time after t3); each burst is fitted "
    "(host ns = s · (ticks − x0) + b) with hard bounds that contain the truth.</p>"
)
FIT_HEAD = [
    "burst",
    "method",
    "round trips",
    "s (ns/tick)",
    "rate error (ppm)",
    "rtt min",
    "bound width",
    "residual rms",
    "feasible",
]


class ClocksSection:
    id = "clocks"
    title = "Clocks"

    def render(self, ctx: Context) -> str:
        return section(ctx.page, ctx.run)


def section(page: Page, run: Run) -> str:
    domains = rd.clock_domains(run)
    out = ['<section id="clocks"><h2>Clock domains</h2>']
    if not domains:
        out.append(
            '<p class="muted">Every stage ran on the host clock: nothing to calibrate.</p>'
            "</section>"
        )
        return "".join(out)
    out.append(INTRO)
    out += [_domain(page, cd) for cd in domains]
    out.append("</section>")
    return "".join(out)


def _domain(page: Page, cd: rd.ClockDomain) -> str:
    """One domain: its heading, its fits, and its figures."""
    heading = (
        f'<h3>{esc(cd.domain)} <span class="muted">(nominal tick {fmt(cd.tick_period_ns)} ns, '
        f"{len(cd.fits)} bursts, {cd.exchange_count:,} round trips)</span></h3>"
    )
    plots = [page.plot(clock_fits(cd), f"clock {cd.domain} fits")]
    if cd.exchanges is not None:
        plots.append(page.plot(clock_exchanges(cd), f"clock {cd.domain} exchanges"))
    elif cd.exchange_count:
        plots.append(
            f'<p class="muted">{cd.exchange_count:,} round trips: too many to draw '
            f"(more than {rd.MAX_EXCHANGES:,}).</p>"
        )
    return heading + table(FIT_HEAD, _fit_rows(cd)) + f'<div class="plots">{"".join(plots)}</div>'


def _fit_rows(cd: rd.ClockDomain) -> list[list[object]]:
    rows: list[list[object]] = []
    for f in cd.fits:
        s = f.get("s_ns_per_tick")
        ppm = (float(s) / cd.tick_period_ns - 1) * 1e6 if s is not None else None
        rows.append(
            [
                f.get("burst"),
                f.get("method"),
                f.get("n"),
                f"{float(s):.9f}" if s is not None else "-",
                ppm,
                fmt_ns(f.get("rtt_min_ns")),
                fmt_ns(f.get("bound_width_ns")),
                fmt_ns(f.get("residual_rms_ns")),
                f.get("feasible"),
            ]
        )
    return rows
