"""The pipeline drawn as inline SVG, with its performance on it (seed 003, Fig. 2).

Stages are boxes placed by a layered-graph layout (grandalf's Sugiyama layout: layers, crossings
reduced, long channels routed through the layers they cross), left to right; channels are
arrows. Each stage carries its state breakdown as a stacked bar (busy, blocked_in, blocked_out,
idle), each channel with figures its mean occupancy against its capacity (a fill bar, with the
maximum marked) and its throughput on its edge; a channel without figures is a plain arrow.
Link channels are dashed and carry their virtual queue's verdict; the bottleneck's stages are
outlined. The drawing scales to the width it is given. Every name is escaped.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from html import escape
from typing import Protocol

from streamscope.core.fmt import fmt_num
from streamscope.core.topology import HOST, ChannelInfo, Topology

BOX_W = 200
BOX_H = 112
GAP = 240
ROW = BOX_H + 76
MARGIN = 24
LEGEND_H = 44

#: Stage states, in bar order, with their colours.
STATES = (
    ("busy", "#2563eb"),
    ("blocked_in", "#f59e0b"),
    ("blocked_out", "#dc2626"),
    ("idle", "#d1d5db"),
)
#: Seed 003's process categories, drawn as a thin second bar when known.
CATEGORIES = (
    ("computation", "#059669"),
    ("communication", "#7c3aed"),
    ("other", "#9ca3af"),
)
VERDICT_COLOURS = {"consistent": "#15803d", "rejected": "#b91c1c"}
DEVICE_STROKE = "#7c3aed"
#: The bottleneck's outline.
NECK = "#dc2626"
HOST_STROKE = "#334155"


class StageLike(Protocol):
    """What the graph reads of a stage's breakdown (``analysis.StageBreakdown``)."""

    @property
    def stage(self) -> str: ...
    @property
    def idle(self) -> float | None: ...
    @property
    def busy(self) -> float | None: ...
    @property
    def blocked_in(self) -> float | None: ...
    @property
    def blocked_out(self) -> float | None: ...


class ChannelLike(Protocol):
    """What the graph reads of a channel's summary (``analysis.ChannelSummary``)."""

    @property
    def channel(self) -> str: ...
    @property
    def capacity(self) -> int | float | None: ...
    @property
    def mean_occupancy(self) -> float | None: ...
    @property
    def max_occupancy(self) -> float | None: ...
    @property
    def full_fraction(self) -> float | None: ...
    @property
    def empty_fraction(self) -> float | None: ...
    @property
    def throughput_per_s(self) -> float | None: ...
    @property
    def virtual(self) -> bool: ...
    @property
    def verdict(self) -> str | None: ...


class _Box:
    """A vertex's size for the layout (its extent across and along the layers: the layout
    runs top-down, and the drawing turns it to run left to right)."""

    def __init__(self, w: float, h: float) -> None:
        self.w, self.h = w, h
        self.xy = (0.0, 0.0)


class _Route:
    """Where the layout routes an edge (the points of the layers it crosses)."""

    def __init__(self) -> None:
        self.pts: list[tuple[float, float]] = []

    def setpath(self, pts: list[tuple[float, float]]) -> None:
        self.pts = [(float(x), float(y)) for x, y in pts]


@dataclass(frozen=True, slots=True)
class Layout:
    """Each stage's box (top-left corner), each channel's route between its ends (the points
    between its two boxes, left to right), and the drawing's size."""

    boxes: dict[str, tuple[float, float]]
    routes: dict[str, list[tuple[float, float]]]
    width: float
    height: float


def layout(topology: Topology) -> Layout:
    """Place the stages by a layered-graph layout, left to right; each connected part of the
    pipeline below the one before."""
    from grandalf.graphs import Edge, Graph, Vertex
    from grandalf.layouts import SugiyamaLayout

    names = [s.name for s in topology.stages]
    for c in topology.channels:
        names += [n for n in (c.src, c.dst) if n not in names]
    vertex = {n: Vertex(n) for n in names}
    for v in vertex.values():
        v.view = _Box(BOX_H, BOX_W)  # across the layers: the box's height
    edges: dict[str, Edge] = {}
    for c in topology.channels:
        if c.src != c.dst and c.name not in edges:
            e = Edge(vertex[c.src], vertex[c.dst])
            e.view = _Route()
            edges[c.name] = e
    graph = Graph(list(vertex.values()), list(edges.values()))
    boxes: dict[str, tuple[float, float]] = {}
    routes: dict[str, list[tuple[float, float]]] = {}
    top = float(MARGIN)
    width = 0.0
    for part in graph.C:
        sug = SugiyamaLayout(part)
        sug.xspace, sug.yspace = ROW - BOX_H, GAP
        sug.init_all()
        sug.draw()
        # top-down (x across, y along the layers) turned left to right
        xs = [v.view.xy[1] for v in part.sV]
        ys = [v.view.xy[0] for v in part.sV]
        x0, y0 = min(xs) - BOX_W / 2, min(ys) - BOX_H / 2
        for v in part.sV:
            cx, cy = v.view.xy[1] - x0 + MARGIN, v.view.xy[0] - y0 + top
            boxes[v.data] = (cx - BOX_W / 2, cy - BOX_H / 2)
        for name, e in edges.items():
            if e.v[0] in part.sV and e.view.pts:
                inner = e.view.pts[1:-1]
                routes[name] = [(py - x0 + MARGIN, px - y0 + top) for px, py in inner]
        right = max(x for x, _ in (boxes[v.data] for v in part.sV)) + BOX_W
        bottom = max(y for _, y in (boxes[v.data] for v in part.sV)) + BOX_H
        width = max(width, right + MARGIN)
        top = bottom + (ROW - BOX_H)
    height = top - (ROW - BOX_H) + MARGIN
    return Layout(boxes, routes, max(width, 760.0), height + LEGEND_H)


def _frac(x: object) -> float | None:
    """An optional field of an analysis record as a float (``None`` if absent)."""
    return float(x) if isinstance(x, (int, float)) else None


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:.0f}%"


def _num(x: float | None, unit: str = "") -> str:
    return "-" if x is None else fmt_num(float(x)) + unit


def _short(name: str, n: int) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _bar(
    x: float, y: float, w: float, h: float, parts: Iterable[tuple[str, float | None, str]]
) -> list[str]:
    out = [f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h}" fill="#f8fafc" '
           f'stroke="#cbd5e1" stroke-width="0.5"/>']  # fmt: skip
    cx = x
    for label, frac, colour in parts:
        if not frac or frac <= 0:
            continue
        pw = w * min(max(frac, 0.0), 1.0)
        out.append(
            f'<rect class="ss-seg ss-seg-{label}" x="{cx:.1f}" y="{y:.1f}" width="{pw:.1f}" '
            f'height="{h}" fill="{colour}"><title>{label} {_pct(frac)}</title></rect>'
        )
        cx += pw
    return out


def _stage_box(
    name: str,
    x: float,
    y: float,
    resource: str,
    kind: str,
    role: str,
    device: bool,
    sb: StageLike | None,
    neck: bool = False,
) -> str:
    e = escape
    stroke = DEVICE_STROKE if device else HOST_STROKE
    tip = [f"stage {name}", f"resource {resource} ({kind})", f"role {role}"]
    parts: list[str] = []
    if sb is not None:
        tip += [f"{label} {_pct(getattr(sb, label))}" for label, _ in STATES]
        tip += [
            f"{label} {_pct(_frac(getattr(sb, label, None)))}"
            for label, _ in CATEGORIES
            if getattr(sb, label, None) is not None
        ]
    if neck:
        tip.append("the bottleneck (see the findings)")
    parts.append(
        f'<g class="ss-stage{" ss-bottleneck" if neck else ""}" data-stage="{e(name)}" '
        f'transform="translate({x:.1f},{y:.1f})">'
        f"<title>{e(chr(10).join(tip))}</title>"
        f'<rect class="ss-stage-box" width="{BOX_W}" height="{BOX_H}" rx="8" fill="#ffffff" '
        f'stroke="{stroke}" stroke-width="{2 if device else 1.4}"/>'
        f'<text x="10" y="22" class="ss-stage-name">{e(_short(name, 24))}</text>'
        f'<text x="10" y="39" class="ss-small">{e(_short(f"{resource} · {kind}", 30))}'
        f"{'' if role == 'stage' else ' · ' + e(role)}</text>"
    )
    has_states = sb is not None and any(getattr(sb, s) is not None for s, _ in STATES)
    if sb is not None and has_states:
        parts += _bar(10, 50, BOX_W - 20, 16, ((s, getattr(sb, s), c) for s, c in STATES))
        busy, bin_, bout = sb.busy, sb.blocked_in, sb.blocked_out
        parts.append(
            f'<text x="10" y="82" class="ss-small">busy {_pct(busy)} · in {_pct(bin_)} · '
            f"out {_pct(bout)}</text>"
        )
        cats = {c: _frac(getattr(sb, c, None)) for c, _ in CATEGORIES}
        if any(v is not None for v in cats.values()):
            parts += _bar(10, 90, BOX_W - 20, 6, ((c, cats[c], k) for c, k in CATEGORIES))
            parts.append(
                f'<text x="10" y="107" class="ss-tiny">comp {_pct(cats["computation"])} · '
                f"comm {_pct(cats['communication'])} · other {_pct(cats['other'])}</text>"
            )
    else:
        parts.append(
            f'<rect x="10" y="50" width="{BOX_W - 20}" height="16" fill="#f1f5f9" '
            'stroke="#cbd5e1" stroke-dasharray="3 2"/>'
            '<text x="10" y="82" class="ss-small ss-muted">no state query</text>'
        )
    if neck:
        parts.append(
            f'<rect class="ss-neck" x="-4" y="-4" width="{BOX_W + 8}" height="{BOX_H + 8}" '
            f'rx="11" fill="none" stroke="{NECK}" stroke-width="3"/>'
            f'<text x="{BOX_W - 8}" y="22" text-anchor="end" class="ss-small ss-neck-tag" '
            f'fill="{NECK}">bottleneck</text>'
        )
    parts.append("</g>")
    return "".join(parts)


def _path(pts: list[tuple[float, float]]) -> str:
    """A smooth path through ``pts``, left to right: each step a curve leaving and reaching its
    points level."""
    (x, y), rest = pts[0], pts[1:]
    d = [f"M{x:.1f},{y:.1f}"]
    for nx, ny in rest:
        dx = (nx - x) / 2
        d.append(f"C{x + dx:.1f},{y:.1f} {nx - dx:.1f},{ny:.1f} {nx:.1f},{ny:.1f}")
        x, y = nx, ny
    return " ".join(d)


def _channel(
    c: ChannelInfo,
    x1: float,
    y1: float,
    x2: float,
    y2: float,
    via: list[tuple[float, float]],
    cs: ChannelLike | None,
) -> tuple[str, str]:
    """The arrow (drawn under the boxes) and the label (drawn over them) of one channel: its
    figures on its edge, halfway along its first step; a channel without figures is a plain
    arrow (its name and capacity in its tooltip)."""
    e = escape
    virtual = c.is_link or (cs is not None and cs.virtual)
    colour = DEVICE_STROKE if virtual else "#475569"
    dash = ' stroke-dasharray="7 4"' if virtual else ""
    pts = [(x1, y1), *via, (x2, y2)]
    (ax, ay), (bx_, by_) = pts[0], pts[1]
    lx, ly = (ax + bx_) / 2, (ay + by_) / 2
    arrow = (
        f'<path class="ss-channel-line" d="{_path(pts)}" fill="none" stroke="{colour}" '
        f'stroke-width="1.6"{dash} marker-end="url(#ss-arrow{"-dev" if virtual else ""})">'
        f"<title>{e(c.name)} · capacity {c.capacity}</title></path>"
    )
    cap = c.capacity
    tip = [f"channel {c.name}", f"{c.transport}, capacity {cap}"]
    if c.is_link:
        tip.append(
            f"link: bulk {c.bulk_size}, transfer {c.transfer_ns / 1e3:.0f}us, "
            f"latency {c.latency_ns / 1e3:.0f}us"
        )
    mean = cs.mean_occupancy if cs is not None else None
    mx = cs.max_occupancy if cs is not None else None
    tput = cs.throughput_per_s if cs is not None else None
    verdict = cs.verdict if cs is not None else None
    if cs is not None:
        tip += [
            f"mean occupancy {_num(mean)}",
            f"max occupancy {_num(mx)}",
            f"full {_pct(cs.full_fraction)}, empty {_pct(cs.empty_fraction)}",
            f"throughput {_num(tput, '/s')}",
        ]
        for extra in ("transferring", "idle", "blocking"):
            v = getattr(cs, extra, None)
            if isinstance(v, (int, float)):
                tip.append(f"{extra} {_pct(float(v))}")
        if verdict:
            tip.append(f"virtual queue: {verdict}")
    if cs is None or (mean is None and tput is None and not virtual):
        plain = (
            f'<g class="ss-channel ss-plain" data-channel="{e(c.name)}" '
            f'data-virtual="{"1" if virtual else "0"}"><title>{e(chr(10).join(tip))}</title></g>'
        )
        return arrow, plain
    w, h = 184, 50
    bx, by = lx - w / 2, ly - h / 2
    label = [
        f'<g class="ss-channel" data-channel="{e(c.name)}" '
        f'data-virtual="{"1" if virtual else "0"}" transform="translate({bx:.1f},{by:.1f})">'
        f"<title>{e(chr(10).join(tip))}</title>"
        f'<rect width="{w}" height="{h}" rx="5" fill="#ffffff" fill-opacity="0.94" '
        f'stroke="{colour}" stroke-width="0.8"{dash}/>'
    ]
    bw = 96
    label.append(
        f'<rect class="ss-fill-bg" x="6" y="7" width="{bw}" height="12" fill="#f1f5f9" '
        'stroke="#94a3b8" stroke-width="0.6"/>'
    )
    if mean is not None and cap:
        fw = bw * min(max(mean / cap, 0.0), 1.0)
        label.append(
            f'<rect class="ss-fill" x="6" y="7" width="{fw:.1f}" height="12" fill="#0ea5e9"/>'
        )
        if mx is not None:
            mx_x = 6 + bw * min(max(mx / cap, 0.0), 1.0)
            label.append(
                f'<line x1="{mx_x:.1f}" y1="4" x2="{mx_x:.1f}" y2="22" stroke="#0f172a" '
                'stroke-width="1.2"/>'
            )
        occ = f"{_num(mean)}/{cap}"
    else:
        occ = f"?/{cap}"
    label.append(f'<text x="{bw + 12}" y="18" class="ss-small">{e(occ)}</text>')
    line2 = f"{_num(tput, '/s')}" if tput is not None else "throughput -"
    label.append(f'<text x="6" y="38" class="ss-small">{e(line2)}</text>')
    if virtual:
        vcol = VERDICT_COLOURS.get(verdict or "", "#64748b")
        label.append(
            f'<text x="{w - 6}" y="38" text-anchor="end" class="ss-small ss-vq" '
            f'fill="{vcol}">VQ {e(verdict or "unchecked")}</text>'
        )
    label.append("</g>")
    return arrow, "".join(label)


def pipeline_svg(
    topology: Topology,
    stages: Mapping[str, StageLike],
    channels: Mapping[str, ChannelLike],
    bottleneck: Collection[str] = (),
) -> str:
    """The whole graph as one ``<svg>`` element, scaled to the width it is given (never wider
    than drawn). ``bottleneck``: the stages the findings name the bottleneck, outlined."""
    placed = layout(topology)
    width, height = placed.width, placed.height
    where = placed.boxes
    info = {s.name: s for s in topology.stages}
    res = {r.name: r for r in topology.resources}
    # Ports: spread a box's outgoing (incoming) channels along its right (left) edge.
    outs: dict[str, list[ChannelInfo]] = {}
    ins: dict[str, list[ChannelInfo]] = {}
    for c in topology.channels:
        outs.setdefault(c.src, []).append(c)
        ins.setdefault(c.dst, []).append(c)

    def other_end_y(ch: ChannelInfo, end: str) -> float:
        return where.get(ch.dst if end == "dst" else ch.src, (0.0, 0.0))[1]

    for lst in outs.values():
        lst.sort(key=lambda ch: other_end_y(ch, "dst"))
    for lst in ins.values():
        lst.sort(key=lambda ch: other_end_y(ch, "src"))

    def port(lst: list[ChannelInfo], c: ChannelInfo) -> float:
        k, n = lst.index(c), len(lst)
        return BOX_H / 2 + (k - (n - 1) / 2) * min(22.0, (BOX_H - 20) / max(n, 1))

    lines: list[str] = []
    labels: list[str] = []
    for c in topology.channels:
        if c.src not in where or c.dst not in where:
            continue
        sx, sy = where[c.src]
        dx, dy = where[c.dst]
        arrow, label = _channel(
            c,
            sx + BOX_W,
            sy + port(outs[c.src], c),
            dx,
            dy + port(ins[c.dst], c),
            placed.routes.get(c.name, []),
            channels.get(c.name),
        )
        lines.append(arrow)
        labels.append(label)
    boxes: list[str] = []
    for name, (x, y) in where.items():
        s = info.get(name)
        r = res.get(s.resource) if s is not None else None
        kind = r.kind if r is not None else "?"
        device = r is not None and r.clock_domain != HOST
        boxes.append(
            _stage_box(
                name,
                x,
                y,
                s.resource if s is not None else "?",
                kind,
                s.role if s is not None else "stage",
                device,
                stages.get(name),
                name in bottleneck,
            )
        )
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
        f'<rect x="{lx}" y="0" width="24" height="12" fill="#0ea5e9"/>'
        f'<text x="{lx + 28}" y="10" class="ss-small">mean occupancy / capacity '
        "(| max)</text>"
    )
    lx += 240
    legend.append(
        f'<line x1="{lx}" y1="6" x2="{lx + 30}" y2="6" stroke="{DEVICE_STROKE}" '
        f'stroke-width="1.6" stroke-dasharray="7 4"/>'
        f'<text x="{lx + 36}" y="10" class="ss-small">link (virtual queue) · device</text>'
    )
    legend.append("</g>")
    defs = (
        "<defs>"
        '<marker id="ss-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        'fill="#475569"/></marker>'
        '<marker id="ss-arrow-dev" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" '
        f'markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" '
        f'fill="{DEVICE_STROKE}"/></marker>'
        "</defs>"
    )
    return (
        f'<svg class="ss-graph" role="img" '
        f'aria-label="pipeline {escape(topology.name)}" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" style="width:100%;max-width:{width:.0f}px;'
        f'height:auto" preserveAspectRatio="xMinYMin meet">'
        f"{defs}{''.join(lines)}{''.join(boxes)}{''.join(labels)}{''.join(legend)}</svg>"
    )
