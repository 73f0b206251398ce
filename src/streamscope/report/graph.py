"""The pipeline drawn as inline SVG, with its performance on it (seed 003, Fig. 2).

Stages are boxes in topological layers, left to right (longest path from a source), ordered in
each layer by the barycentre of their neighbours; channels are arrows. Each stage carries its
state breakdown as a stacked bar (busy, blocked_in, blocked_out, idle), each channel its mean
occupancy against its capacity (a fill bar, with the maximum marked) and its throughput; link
channels are dashed and carry their virtual queue's verdict. Every name is escaped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
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


def layers(topology: Topology) -> list[list[str]]:
    """Stages in topological layers (a stage's layer: the longest path to it from a source),
    each layer ordered to limit crossings (barycentre sweeps)."""
    names = [s.name for s in topology.stages]
    for c in topology.channels:
        for n in (c.src, c.dst):
            if n not in names:
                names.append(n)
    preds: dict[str, list[str]] = {n: [] for n in names}
    succs: dict[str, list[str]] = {n: [] for n in names}
    for c in topology.channels:
        if c.src != c.dst:
            preds[c.dst].append(c.src)
            succs[c.src].append(c.dst)
    indeg = {n: len(preds[n]) for n in names}
    layer = dict.fromkeys(names, 0)
    ready = [n for n in names if indeg[n] == 0]
    seen: set[str] = set()
    while ready:
        n = ready.pop(0)
        seen.add(n)
        for m in succs[n]:
            layer[m] = max(layer[m], layer[n] + 1)
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    top = max(layer.values(), default=0)
    for n in names:  # a cycle (never written by a valid pipeline): park its stages at the end
        if n not in seen:
            layer[n] = top + 1
    count = max(layer.values(), default=-1) + 1
    out: list[list[str]] = [[] for _ in range(count)]
    for n in names:
        out[layer[n]].append(n)
    pos = {n: float(i) for col in out for i, n in enumerate(col)}
    for sweep in range(4):
        order = range(1, count) if sweep % 2 == 0 else range(count - 2, -1, -1)
        nbrs = preds if sweep % 2 == 0 else succs
        for li in order:
            col = out[li]

            def key(n: str, nb: Mapping[str, list[str]] = nbrs) -> float:
                ps = [pos[m] for m in nb[n]]
                return sum(ps) / len(ps) if ps else pos[n]

            col.sort(key=key)
            for i, n in enumerate(col):
                pos[n] = float(i)
    return out


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
    parts.append(
        f'<g class="ss-stage" data-stage="{e(name)}" transform="translate({x:.1f},{y:.1f})">'
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
    parts.append("</g>")
    return "".join(parts)


def _channel(
    c: ChannelInfo,
    x1: float,
    y1: float,
    x2: float,
    y2: float,
    span: int,
    cs: ChannelLike | None,
) -> tuple[str, str]:
    """The arrow (drawn under the boxes) and the label (drawn over them) of one channel."""
    e = escape
    virtual = c.is_link or (cs is not None and cs.virtual)
    colour = DEVICE_STROKE if virtual else "#475569"
    dash = ' stroke-dasharray="7 4"' if virtual else ""
    lx = x1 + GAP / 2
    ly = (y1 + y2) / 2 if span <= 1 else y1
    if span <= 1:
        dx = (x2 - x1) / 2
        d = f"M{x1:.1f},{y1:.1f} C{x1 + dx:.1f},{y1:.1f} {x2 - dx:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    else:
        d = (
            f"M{x1:.1f},{y1:.1f} L{lx + 90:.1f},{y1:.1f} "
            f"C{lx + 90 + GAP / 2:.1f},{y1:.1f} {x2 - GAP / 2:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
        )
    arrow = (
        f'<path class="ss-channel-line" d="{d}" fill="none" stroke="{colour}" '
        f'stroke-width="1.6"{dash} marker-end="url(#ss-arrow{"-dev" if virtual else ""})"/>'
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
) -> str:
    """The whole graph as one ``<svg>`` element (scales to the page width)."""
    cols = layers(topology)
    rows = max((len(c) for c in cols), default=1)
    height = MARGIN * 2 + rows * ROW - (ROW - BOX_H) + LEGEND_H
    width = MARGIN * 2 + max(len(cols), 1) * (BOX_W + GAP) - GAP
    width = max(width, 760)
    where: dict[str, tuple[float, float, int]] = {}
    for li, col in enumerate(cols):
        off = (rows - len(col)) * ROW / 2
        for i, n in enumerate(col):
            where[n] = (MARGIN + li * (BOX_W + GAP), MARGIN + off + i * ROW, li)
    info = {s.name: s for s in topology.stages}
    res = {r.name: r for r in topology.resources}
    # Ports: spread a box's outgoing (incoming) channels along its right (left) edge.
    outs: dict[str, list[ChannelInfo]] = {}
    ins: dict[str, list[ChannelInfo]] = {}
    for c in topology.channels:
        outs.setdefault(c.src, []).append(c)
        ins.setdefault(c.dst, []).append(c)

    def other_end_y(ch: ChannelInfo, end: str) -> float:
        return where.get(ch.dst if end == "dst" else ch.src, (0.0, 0.0, 0))[1]

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
        sx, sy, sl = where[c.src]
        dx, dy, dl = where[c.dst]
        arrow, label = _channel(
            c,
            sx + BOX_W,
            sy + port(outs[c.src], c),
            dx,
            dy + port(ins[c.dst], c),
            dl - sl,
            channels.get(c.name),
        )
        lines.append(arrow)
        labels.append(label)
    boxes: list[str] = []
    for name, (x, y, _) in where.items():
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
        f'aria-label="pipeline {escape(topology.name)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" preserveAspectRatio="xMinYMin meet">'
        f"{defs}{''.join(lines)}{''.join(boxes)}{''.join(labels)}{''.join(legend)}</svg>"
    )
