"""A stage's flame graph as one ``<svg>``: its sampled stacks, the stage at the bottom, each
function above its caller, as wide as the share of the stage's busy time spent in it.

In: one stage's stacks over the run (``(state, stack, ns)``: running, or waiting with the frame
it waited in). Out: an ``<svg class="ss-flame">`` that scales to its container's width, each
frame a ``<rect>`` with a ``<title>`` (its function, its share and time) and a label where one
fits (the page's script trims labels to their boxes as the browser draws them).
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

from streamscope.analysis.hotspots import BUSY_STATES
from streamscope.core.fmt import fmt_ns
from streamscope.report.markup import esc

#: The drawing's width in its own units (it is scaled to its place), and each level's height.
WIDTH = 1000.0
ROW = 18.0
#: Frames narrower than this (units) are not drawn; labels need this much to be written.
MIN_W = 0.4
LABEL_W = 28.0
#: Roughly what one character of a label takes (units, at the page's 11 px font).
CHAR_W = 6.4
#: The leaf of a busy worker's time while it was not running.
WAITING = "[waiting]"


@dataclass
class _Node:
    name: str
    ns: int = 0
    children: dict[str, _Node] = field(default_factory=dict)


def flame_tree(stage: str, rows: Iterable[tuple[str, str, int]]) -> _Node:
    """The stage's stacks as a tree: ``rows`` of (state, stack, ns), running or waiting."""
    root = _Node(stage)
    for state, stack, ns in rows:
        if state not in BUSY_STATES or ns <= 0:
            continue
        frames = [f for f in stack.split(";") if f]
        if state == "waiting":
            frames.append(WAITING)
        node = root
        node.ns += ns
        for f in frames:
            node = node.children.setdefault(f, _Node(f))
            node.ns += ns
    return root


def fold_trunk(root: _Node, keep: int = 2) -> _Node:
    """The frames every sample of the stage shares below the first branch (a thread's
    bootstrap, a forked worker's parent's calls) drawn as one box, all but the ``keep`` nearest
    the branch: the graph's height goes to where the time divides."""
    chain: list[_Node] = []
    node = root
    while len(node.children) == 1:
        (child,) = node.children.values()
        if child.ns != node.ns or child.name == WAITING:
            break
        chain.append(child)
        node = child
    if len(chain) <= keep + 1:
        return root
    folded, kept = chain[: len(chain) - keep], chain[len(chain) - keep]
    trunk = _Node(f"{len(folded)} frames: {folded[0].name} … {folded[-1].name}", root.ns)
    trunk.children = {kept.name: kept}
    root.children = {trunk.name: trunk}
    return root


def _colour(name: str) -> str:
    if name == WAITING:
        return "#cbd5e1"
    h = zlib.crc32(name.encode())
    return f"hsl({h % 50 + 5},{70 + h // 50 % 20}%,{58 + h // 1000 % 12}%)"


def flame_svg(root: _Node, fig_id: str) -> str:
    """The tree as an ``<svg>``: root at the bottom, children left to right by name."""
    if root.ns <= 0:
        return ""
    depth = _depth(root)
    height = (depth + 1) * ROW
    parts: list[str] = []

    def draw(node: _Node, x: float, level: int) -> None:
        w = node.ns / root.ns * WIDTH
        if w < MIN_W:
            return
        y = height - (level + 1) * ROW
        share = node.ns / root.ns
        tip = f"{node.name} — {share * 100:.1f} % ({fmt_ns(node.ns)})"
        fill = "#94a3b8" if level == 0 else _colour(node.name)
        label = ""
        if w >= LABEL_W:
            room = int((w - 6) / CHAR_W)
            text = node.name if len(node.name) <= room else node.name[: max(room - 1, 1)] + "…"
            label = (f'<text x="{x + 3:.1f}" y="{y + ROW - 5:.1f}" '
                     f'data-name="{esc(node.name)}">{esc(text)}</text>')  # fmt: skip
        parts.append(
            f'<g class="ss-frame"><title>{esc(tip)}</title><rect x="{x:.2f}" y="{y:.1f}" '
            f'width="{w:.2f}" height="{ROW - 1:.1f}" rx="2" fill="{fill}"/>{label}</g>'
        )
        cx = x
        for child in sorted(node.children.values(), key=lambda n: n.name):
            draw(child, cx, level + 1)
            cx += child.ns / root.ns * WIDTH

    draw(root, 0.0, 0)
    return (
        f'<svg class="ss-flame" id="{esc(fig_id)}" role="img" viewBox="0 0 {WIDTH:.0f} '
        f'{height:.0f}" width="100%" preserveAspectRatio="xMinYMin meet" '
        f'aria-label="flame graph of {esc(root.name)}">{"".join(parts)}</svg>'
    )


def _depth(node: _Node) -> int:
    return 1 + max((_depth(c) for c in node.children.values()), default=0) if node.children else 0


__all__ = ["WAITING", "flame_svg", "flame_tree", "fold_trunk"]
