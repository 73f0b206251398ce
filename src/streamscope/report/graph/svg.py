"""The whole pipeline drawing as one ``<svg>``: boxes placed by ``layout``, channels between
their ports, the bottleneck outlined, a legend; scaled to the width it is given. Past
``FAMILY_AT`` stages or channels, a family of them is one box or edge (``family``).

In: a ``Topology``, each stage's breakdown and each channel's summary, the bottleneck's
stages. Out: SVG text.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from html import escape

from streamscope.core.topology import HOST, Topology
from streamscope.report.graph.channel import ChannelLike, channel
from streamscope.report.graph.family import fold
from streamscope.report.graph.layout import Layout, layout, link_key
from streamscope.report.graph.stage import StageLike, StagePlace, stage_box
from streamscope.report.graph.style import (
    BOX_H,
    BOX_W,
    DEVICE_STROKE,
    FILL,
    HOST_STROKE,
    LEGEND_H,
    MARGIN,
    STATES,
)

#: Around a host's stages: the frame's padding and its name's line (px).
HOST_PAD = 8
HOST_LABEL_H = 14
#: The arrow heads: a host channel's and a link's.
DEFS = (
    "<defs>"
    '<marker id="ss-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
    'fill="#475569"/></marker>'
    '<marker id="ss-arrow-dev" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
    f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
    f'fill="{DEVICE_STROKE}"/></marker>'
    "</defs>"
)


def pipeline_svg(
    topology: Topology,
    stages: Mapping[str, StageLike],
    channels: Mapping[str, ChannelLike],
    bottleneck: Collection[str] = (),
) -> str:
    """The whole graph as one ``<svg>`` element, scaled to the width it is given (never wider
    than drawn). ``bottleneck``: the stages the findings name the bottleneck, outlined."""
    drawn = fold(topology, stages, channels, bottleneck)
    topology = drawn.topology
    placed = layout(topology)
    width, height = placed.width, placed.height
    lines, labels = _channels(topology, placed, drawn.channels, drawn.channel_members)
    places = _places(topology)  # a channel's end that is no stage: unknown
    boxes = [
        stage_box(name, x, y, places.get(name, StagePlace()), drawn.stages.get(name),
                  name in drawn.bottleneck, drawn.stage_members.get(name, 1))
        for name, (x, y) in placed.boxes.items()
    ]  # fmt: skip
    return (
        f'<svg class="ss-graph" role="img" '
        f'aria-label="pipeline {escape(topology.name)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" style="width:100%;max-width:{width:.0f}px;'
        f'height:auto" preserveAspectRatio="xMinYMin meet">'
        f"{DEFS}{''.join(_host_groups(topology, placed))}{''.join(lines)}{''.join(boxes)}"
        f"{''.join(labels)}{_legend(height)}</svg>"
    )


def _host_groups(topology: Topology, placed: Layout) -> list[str]:
    """Behind the boxes, one frame around each cluster host's stages, named after the host."""
    out = []
    for r in topology.resources:
        if r.kind != "host":
            continue
        boxes = [placed.boxes[s.name] for s in topology.stages
                 if s.resource == r.name and s.name in placed.boxes]  # fmt: skip
        if not boxes:
            continue
        x0 = min(x for x, _ in boxes) - HOST_PAD
        y0 = min(y for _, y in boxes) - HOST_PAD - HOST_LABEL_H
        x1 = max(x for x, _ in boxes) + BOX_W + HOST_PAD
        y1 = max(y for _, y in boxes) + BOX_H + HOST_PAD
        out.append(
            f'<g class="ss-host" data-host="{escape(r.name)}"><rect x="{x0:.1f}" y="{y0:.1f}" '
            f'width="{x1 - x0:.1f}" height="{y1 - y0:.1f}" rx="12" fill="#f1f5f9" '
            f'stroke="{HOST_STROKE}" stroke-width="1" stroke-dasharray="3 3"/>'
            f'<text x="{x0 + 8:.1f}" y="{y0 + HOST_LABEL_H - 2:.1f}" class="ss-small">'
            f"host {escape(r.name)} · clock {escape(r.clock_domain)}</text></g>"
        )
    return out


def _places(topology: Topology) -> dict[str, StagePlace]:
    """Where each stage runs."""
    resources = {r.name: r for r in topology.resources}
    out = {}
    for s in topology.stages:
        r = resources.get(s.resource)
        kind = r.kind if r is not None else "?"
        out[s.name] = StagePlace(s.resource, kind, s.role, r is not None and r.clock_domain != HOST)
    return out


def _channels(
    topology: Topology,
    placed: Layout,
    channels: Mapping[str, ChannelLike],
    members: Mapping[str, int],
) -> tuple[list[str], list[str]]:
    """Every channel between two placed stages: its arrow and its label, from its source's
    port to its destination's (``members``: how many channels a family's stands for). A box's
    outgoing (incoming) channels are spread along its right (left) edge, in the order of the
    boxes at their other ends, top to bottom."""
    where = placed.boxes
    links = topology.links()
    outs: dict[str, list[str]] = {}
    ins: dict[str, list[str]] = {}
    other_end = {}
    for c, a, b in links:
        key = link_key(c, a, b)
        outs.setdefault(a, []).append(key)
        ins.setdefault(b, []).append(key)
        other_end[key] = (a, b)
    for lst in outs.values():
        lst.sort(key=lambda k: where.get(other_end[k][1], (0.0, 0.0))[1])
    for lst in ins.values():
        lst.sort(key=lambda k: where.get(other_end[k][0], (0.0, 0.0))[1])
    lines: list[str] = []
    labels: list[str] = []
    for c, a, b in links:
        if a not in where or b not in where:
            continue
        key = link_key(c, a, b)
        (sx, sy), (dx, dy) = where[a], where[b]
        start = (sx + BOX_W, sy + _port(outs[a], key))
        end = (dx, dy + _port(ins[b], key))
        route = [start, *placed.routes.get(key, []), end]
        arrow, label = channel(c, route, channels.get(c.name), members.get(c.name, 1))
        lines.append(arrow)
        if key == c.name:  # one label a channel, on its first producer's arrow
            labels.append(label)
    return lines, labels


def _port(side: list[str], key: str) -> float:
    """How far down its box's side the edge ``key`` (``layout.link_key``) leaves or arrives."""
    k, n = side.index(key), len(side)
    return BOX_H / 2 + (k - (n - 1) / 2) * min(22.0, (BOX_H - 20) / max(n, 1))


def _legend(height: float) -> str:
    ly = height - LEGEND_H + 14
    legend = [f'<g class="ss-legend" transform="translate({MARGIN},{ly})">']
    lx = 0
    for label, colour in STATES:
        legend.append(
            f'<rect x="{lx}" y="0" width="12" height="12" fill="{colour}"/>'
            f'<text x="{lx + 16}" y="10" class="ss-small">{label}</text>'
        )
        lx += 100
    legend.append(
        f'<rect x="{lx}" y="0" width="24" height="12" fill="{FILL}"/>'
        f'<text x="{lx + 28}" y="10" class="ss-small">mean occupancy / capacity '
        "(| max)</text>"
    )
    lx += 240
    legend.append(
        f'<line x1="{lx}" y1="6" x2="{lx + 30}" y2="6" stroke="{DEVICE_STROKE}" '
        f'stroke-width="1.6" stroke-dasharray="7 4"/>'
        f'<text x="{lx + 36}" y="10" class="ss-small">link (virtual queue) · device or host</text>'
    )
    legend.append("</g>")
    return "".join(legend)
