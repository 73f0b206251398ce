"""The virtual queues section: each link channel's estimated occupancy, its self-check verdict
and distances, its figures per frame and level distributions, and every frame's details.

In: a ``Run`` (``Run.virtual_queues``, ``data.vq_levels``) and the page that collects figures.
Out: the section's HTML.
"""

from __future__ import annotations

from typing import Any

from streamscope.report import data as rd
from streamscope.report.figures.virtual import vq_levels, vq_means, vq_selfcheck
from streamscope.report.markup import Page, badge, esc, table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run

INTRO = (
    '<p class="muted">A link channel\'s occupancy is estimated per frame by simulation '
    "(tail buffer, bulk-transfer bus, head buffer) and checked against the two measured "
    "buffers. W1 between measured and predicted buffers above the model's own spread "
    "(chance) plus what the clocks' uncertainty can shift (clock bias) means the buffers "
    "tell the model from the link; a frame is rejected only when that discrepancy also "
    "exceeds the tolerance (a share of the estimated mean occupancy, at least one item, plus "
    "the clock bias): the estimate may be off by more than that. <b>decided by</b> says "
    "which part decided each frame; the estimate &plusmn; its band is what the self-check "
    "cannot rule out. The run is rejected when more frames are rejected than chance explains."
    "</p>"
)
ARRIVALS = (
    '<p class="muted">Arrivals model: <b>profile</b> frames are simulated with the '
    "insertions the device counted per sub-window (bursts kept), <b>renewal</b> frames "
    "with gaps drawn independently from the histogram (the model of Lancaster et al., "
    "<i>Crossing Boundaries in TimeTrial</i>, 2011). i.i.d. gaps: "
    "the self-check's verdict on the renewal model; rejected means the source's gaps "
    "depend on each other.</p>"
)
#: The run-wide self-check's columns: (heading, key of ``Run.virtual_queues``).
SUMMARY = (
    ("frames checked", "frames"),
    ("rejected", "frames_rejected"),
    ("told apart", "frames_distinguishable"),
    ("tolerance", "tolerance"),
    ("frames decided by", "decided_by"),
    ("alpha", "alpha"),
    ("p-value", "p_value"),
    ("W1 self-check (items)", "w1_items"),
    ("W1 to truth (items)", "w1_truth_items"),
    ("W1 ideal queue to truth", "w1_truth_ideal_items"),
    ("arrivals model (frames)", "arrivals_used"),
    ("i.i.d. gaps", "renewal_verdict"),
    ("dependence p", "dependence_p"),
    ("W1 i.i.d. model to truth", "w1_truth_renewal_items"),
)
#: Each frame's details, by their keys.
FRAME_COLUMNS = [
    "frame",
    "arrivals",
    "verdict",
    "decided_by",
    "renewal_verdict",
    "dependence_p",
    "w1_items",
    "threshold_items",
    "clock_bias_items",
    "excess_items",
    "tolerance_items",
    "band_items",
    "tv",
    "predicted_mean",
    "ideal_mean",
    "tail_mean",
    "head_mean",
    "items_in",
    "items_out",
    "truth_mean",
    "w1_truth_items",
    "renewal_mean",
    "w1_truth_renewal_items",
]


class VirtualQueuesSection:
    id = "virtual-queues"
    title = "Virtual queues"

    def render(self, ctx: Context) -> str:
        return section(ctx.page, ctx.run)


def section(page: Page, run: Run) -> str:
    vqs = run.virtual_queues()
    out = ['<section id="virtual-queues"><h2>Virtual queues</h2>']
    if not vqs:
        out.append(
            '<p class="muted">No virtual queue: no occupancy query on a link channel.</p></section>'
        )
        return "".join(out)
    out.append(INTRO)
    out += [_queue(page, run, v) for v in vqs]
    out.append("</section>")
    return "".join(out)


def _queue(page: Page, run: Run, v: dict[str, Any]) -> str:
    """One virtual queue: its heading and verdict, its self-check, its figures, its frames."""
    target = str(v["target"])
    verdict = str(v.get("verdict") or "none")
    out = [
        f'<h3 class="ss-vq-title" data-verdict="{esc(verdict)}">{esc(target)} '
        f'{badge(verdict, "v-" + verdict)} <span class="muted">({esc(v.get("model"))} '
        f"model, q{esc(v.get('query_id'))})</span></h3>",
        table([h for h, _ in SUMMARY], [[_summary_cell(v, k) for _, k in SUMMARY]]),
        ARRIVALS,
    ]
    frames = list(v.get("frames_detail") or [])
    levels = rd.vq_levels(run, int(v["query_id"]), target)
    plots = []
    if frames:
        plots.append(page.plot(vq_selfcheck(target, frames), f"vq {target} self-check"))
        plots.append(page.plot(vq_means(target, frames), f"vq {target} means"))
    out.append(f'<div class="plots">{"".join(plots)}</div>')
    if levels.overall:
        out.append(page.plot(vq_levels(target, levels), f"vq {target} levels"))
    rows = [[f.get(c) for c in FRAME_COLUMNS] for f in frames]
    out.append(
        f"<details><summary>every frame ({len(rows)})</summary>"
        f"{table(FRAME_COLUMNS, rows)}</details>"
    )
    return "".join(out)


def _summary_cell(v: dict[str, Any], key: str) -> object:
    if key == "arrivals_used":  # frames simulated with each arrivals model
        return ", ".join(f"{k} {n}" for k, n in v["arrivals_used"].items()) or None
    if key == "decided_by":
        return ", ".join(f"{k} {n}" for k, n in v["decided_by"].items()) or None
    if key == "tolerance":
        t = v.get("tolerance")
        return None if t is None else f"{t:.0%} (at least 1 item)"
    return v.get(key)
