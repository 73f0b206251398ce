"""The pipeline section: the graph with its performance, each stage's time in each state (and
each worker's, for a stage worked in by several), and each channel's figures. Past
``FAMILY_AT`` stages or channels, a family of them is one box, edge and row (``graph.family``).

In: a ``Run`` and its findings. Out: the section's HTML.
"""

from __future__ import annotations

from collections.abc import Sequence

from streamscope.analysis import (
    Finding,
    StageBreakdown,
    channel_summary,
    stage_breakdown,
)
from streamscope.core.fmt import pct
from streamscope.core.topology import FAMILY_AT
from streamscope.report.graph import CATEGORIES, STATES, ChannelLike, pipeline_svg
from streamscope.report.graph.family import Folded, fold
from streamscope.report.markup import table
from streamscope.report.sections.base import Context
from streamscope.store.reader import Run

INTRO = (
    '<p class="muted">Stages in topological order, left to right; each with the share of '
    "its observed time in each state, each channel with its mean occupancy against its "
    "capacity (the tick marks the maximum) and its throughput. Dashed: a link to a device, "
    "estimated as a virtual queue. Outlined in red: the bottleneck. Hover for the "
    "figures.</p>"
)
#: Curreri et al.'s (2010) process categories, shown where a stage's breakdown has them.
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
FAMILIES = (
    f'<p class="muted ss-families">More than {FAMILY_AT} stages or channels: those a program '
    "made many of (numbered alike: <code>#2</code>, <code>#3</code>, ...) are one box, edge and "
    "row per family, with how many it stands for; its figures are each one's on average, its "
    "max the largest.</p>"
)


class PipelineSection:
    id = "pipeline"
    title = "Pipeline"

    def render(self, ctx: Context) -> str:
        return section(ctx.run, ctx.found)


def section(run: Run, found: Sequence[Finding]) -> str:
    """The section, the bottleneck marked from the run's findings ``found``."""
    stages = stage_breakdown(run)
    channels = channel_summary(run)
    by_stage = {s.stage: s for s in stages}
    by_channel = {c.channel: c for c in channels}
    neck = _bottleneck(found)
    svg = pipeline_svg(run.topology, by_stage, by_channel, neck)
    drawn = fold(run.topology, by_stage, by_channel)
    head = ["stage", "resource", *(s for s, _ in STATES), *CATEGORY_NAMES]
    many = bool(drawn.stage_members or drawn.channel_members)
    stage_rows = _family_rows(drawn) if drawn.stage_members else _stage_rows(run, stages)
    return (
        f'<section id="pipeline"><h2>Pipeline</h2>{INTRO}{FAMILIES if many else ""}'
        f'<div class="graph-wrap">{svg}</div>'
        f"<h3>Stages</h3>{table(head, stage_rows)}"
        f"<h3>Channels</h3>{table(CHANNEL_HEAD, _channel_rows(drawn))}"
        "</section>"
    )


def _bottleneck(found: Sequence[Finding]) -> list[str]:
    """The stages the findings name the bottleneck (a group's members)."""
    out: list[str] = []
    for f in found:
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


def _family_rows(drawn: Folded) -> list[list[object]]:
    """Each stage's or family's shares of its time (a family's: its members' on average)."""
    rows: list[list[object]] = []
    for info in drawn.topology.stages:
        n = drawn.stage_members.get(info.name, 1)
        s = drawn.stages.get(info.name)
        row: list[object] = [info.name if n == 1 else f"{info.name} (a family of {n})"]
        row.append(getattr(s, "resource", info.resource))
        row += [pct(_opt(s, st), 1) for st, _ in STATES]
        row += [pct(_opt(s, c), 1) for c in CATEGORY_NAMES]
        rows.append(row)
    return rows


def _channel_rows(drawn: Folded) -> list[list[object]]:
    """Each channel's or family's figures, in the order drawn."""
    rows = []
    for info in drawn.topology.channels:
        c = drawn.channels.get(info.name)
        if c is None:
            continue
        n = drawn.channel_members.get(info.name, 1)
        rows.append(_channel_row(c, info.transport, info.name if n == 1 else
                                 f"{info.name} (a family of {n})"))  # fmt: skip
    return rows


def _channel_row(c: ChannelLike, transport: str, name: str) -> list[object]:
    return [
        name,
        transport,
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
