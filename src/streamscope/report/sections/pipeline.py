"""The pipeline section: the graph with its performance, each stage's time in each state (and
each worker's, for a stage worked in by several), and each channel's figures.

In: a ``Run``. Out: the section's HTML.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamscope.analysis import (
    ChannelSummary,
    StageBreakdown,
    channel_summary,
    findings,
    stage_breakdown,
)
from streamscope.core.fmt import pct
from streamscope.report.graph import CATEGORIES, STATES, pipeline_svg
from streamscope.report.markup import table
from streamscope.store.reader import Run

INTRO = (
    '<p class="muted">Stages in topological order, left to right; each with the share of '
    "its observed time in each state, each channel with its mean occupancy against its "
    "capacity (the tick marks the maximum) and its throughput. Dashed: a link to a device, "
    "estimated as a virtual queue. Outlined in red: the bottleneck. Hover for the "
    "figures.</p>"
)
#: Seed 003's process categories, shown where a stage's breakdown has them.
CATEGORY_NAMES = tuple(c for c, _ in CATEGORIES)
#: A link channel's time in each state of its transfers, shown where it has them.
LINK_STATES = ("transferring", "idle", "blocking")
CHANNEL_HEAD = [
    "channel",
    "transport",
    "capacity",
    "mean occupancy",
    "max",
    "full",
    "empty",
    "throughput (items/s)",
    "virtual",
    "communication",
]


def section(run: Run) -> str:
    stages = stage_breakdown(run)
    channels = channel_summary(run)
    svg = pipeline_svg(
        run.topology,
        {s.stage: s for s in stages},
        {c.channel: c for c in channels},
        _bottleneck(run),
    )
    head = ["stage", "resource", *(s for s, _ in STATES), *CATEGORY_NAMES]
    return (
        f'<section id="pipeline"><h2>Pipeline</h2>{INTRO}'
        f'<div class="graph-wrap">{svg}</div>'
        f"<h3>Stages</h3>{table(head, _stage_rows(run, stages))}"
        f"<h3>Channels</h3>{table(CHANNEL_HEAD, [_channel_row(c) for c in channels])}"
        "</section>"
    )


def _bottleneck(run: Run) -> list[str]:
    """The stages the findings name the bottleneck (a group's members)."""
    out: list[str] = []
    for f in findings(run):
        if f.kind == "bottleneck":
            members = f.evidence.get("members") if isinstance(f.evidence, dict) else None
            out += [str(m) for m in members] if isinstance(members, list | tuple) else [f.target]
    return out


def _workers(run: Run) -> dict[str, list[tuple[str, dict[str, float]]]]:
    """Per stage, each worker's resource and share of its known time in each state."""
    t = run.table("worker")
    out: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for i in range(len(t.get("stage", ()))):
        known = {st: float(t[f"{st}_ns"][i]) for st, _ in STATES}
        total = sum(known.values())
        shares = {st: v / total for st, v in known.items()} if total > 0 else {}
        out.setdefault(str(t["stage"][i]), []).append((str(t["resource"][i]), shares))
    return out


def _stage_rows(run: Run, stages: Sequence[StageBreakdown]) -> list[list[object]]:
    """Each stage's shares of its time; under a stage worked in by several, each worker's."""
    rows: list[list[object]] = []
    workers = _workers(run)
    for s in stages:
        row: list[object] = [s.stage, s.resource]
        row += [pct(getattr(s, st), 1) for st, _ in STATES]
        row += [pct(_opt(s, c), 1) for c in CATEGORY_NAMES]
        rows.append(row)
        mine = workers.get(s.stage, [])
        if len(mine) > 1:
            for k, (resource, shares) in enumerate(mine, start=1):
                rows.append([f"  worker {k}", resource, *(pct(shares.get(st), 1) for st, _ in STATES),
                             "", "", ""])  # fmt: skip
    return rows


def _channel_row(c: ChannelSummary) -> list[object]:
    return [
        c.channel,
        c.transport,
        c.capacity,
        c.mean_occupancy,
        c.max_occupancy,
        pct(c.full_fraction, 1),
        pct(c.empty_fraction, 1),
        c.throughput_per_s,
        ("virtual queue: " + (c.verdict or "unchecked")) if c.virtual else "",
        " · ".join(f"{k} {pct(v, 1)}" for k in LINK_STATES if (v := _opt(c, k)) is not None),
    ]


def _opt(obj: object, name: str) -> float | None:
    v = getattr(obj, name, None)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None
