"""Where the pipeline's stages and channels go: a layered-graph layout (grandalf's Sugiyama
layout: layers, crossings reduced, long channels routed through the layers they cross).

In: a ``Topology``. Out: a ``Layout``: each stage's box, each channel's route, the size.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamscope.core.topology import ChannelInfo, Topology
from streamscope.report.graph.style import BOX_H, BOX_W, GAP, LEGEND_H, MARGIN, ROW


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
    graph, edges = _graph(topology)
    boxes: dict[str, tuple[float, float]] = {}
    routes: dict[str, list[tuple[float, float]]] = {}
    top = float(MARGIN)
    width = 0.0
    for part in graph.C:
        right, bottom = _place(part, edges, top, boxes, routes)
        width = max(width, right + MARGIN)
        top = bottom + (ROW - BOX_H)
    height = top - (ROW - BOX_H) + MARGIN
    return Layout(boxes, routes, max(width, 760.0), height + LEGEND_H)


def link_key(c: ChannelInfo, src: str, dst: str) -> str:
    """The name of the edge from ``src`` to ``dst`` through channel ``c``: the channel's own
    for its ``src`` and ``dst``, one of its own for another producer or consumer of it."""
    return c.name if (src, dst) == (c.src, c.dst) else f"{c.name} | {src} -> {dst}"


def _graph(topology: Topology) -> tuple[Any, dict[str, Any]]:
    """The grandalf graph of the stages (every channel's ends too) and its edges by channel
    (one per channel between two different stages)."""
    from grandalf.graphs import Edge, Graph, Vertex

    names = [s.name for s in topology.stages]
    links = topology.links()
    for _, a, b in links:
        names += [n for n in (a, b) if n not in names]
    vertex = {n: Vertex(n) for n in names}
    for v in vertex.values():
        v.view = _Box(BOX_H, BOX_W)  # across the layers: the box's height
    edges: dict[str, Any] = {}
    for c, a, b in links:
        key = link_key(c, a, b)
        if a != b and key not in edges:
            e = Edge(vertex[a], vertex[b])
            e.view = _Route()
            edges[key] = e
    return Graph(list(vertex.values()), list(edges.values())), edges


def _place(
    part: Any,
    edges: dict[str, Any],
    top: float,
    boxes: dict[str, tuple[float, float]],
    routes: dict[str, list[tuple[float, float]]],
) -> tuple[float, float]:
    """Lay out one connected part with its top at ``top``, into ``boxes`` and ``routes``;
    its right and bottom edges."""
    from grandalf.layouts import SugiyamaLayout

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
    return right, bottom
