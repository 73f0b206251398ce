"""A stage drawn as a box: its name, resource and role, its state breakdown as a stacked bar
(busy, blocked_in, blocked_out, idle) and, when known, the process categories of Curreri et al.
(Performance Analysis Framework for High-Level Language Applications in Reconfigurable
Computing, 2010) as a thin second bar; the bottleneck's stages outlined; a family of stages
drawn as one, a stack of boxes that says how many it stands for.

In: a stage's place and breakdown. Out: SVG text; every name escaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from html import escape
from typing import Protocol

from streamscope.core.fmt import pct
from streamscope.report.graph.style import (
    BOX_H,
    BOX_W,
    CATEGORIES,
    DEVICE_STROKE,
    HOST_STROKE,
    NECK,
    STATES,
)


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


@dataclass(frozen=True, slots=True)
class StagePlace:
    """Where a stage runs, as its box says: its resource, that resource's kind, the stage's
    role, and whether the resource is a device (its own clock domain)."""

    resource: str = "?"
    kind: str = "?"
    role: str = "stage"
    device: bool = False


def _frac(x: object) -> float | None:
    """An optional field of an analysis record as a float (``None`` if absent)."""
    return float(x) if isinstance(x, (int, float)) else None


def _short(name: str, n: int) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def bar(
    x: float, y: float, w: float, h: float, parts: Iterable[tuple[str, float | None, str]]
) -> list[str]:
    """A stacked bar of fractions (``label``, fraction, colour), each segment titled."""
    out = [f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h}" fill="#f8fafc" '
           f'stroke="#cbd5e1" stroke-width="0.5"/>']  # fmt: skip
    cx = x
    for label, frac, colour in parts:
        if not frac or frac <= 0:
            continue
        pw = w * min(max(frac, 0.0), 1.0)
        out.append(
            f'<rect class="ss-seg ss-seg-{label}" x="{cx:.1f}" y="{y:.1f}" width="{pw:.1f}" '
            f'height="{h}" fill="{colour}"><title>{label} {pct(frac)}</title></rect>'
        )
        cx += pw
    return out


def stage_box(
    name: str,
    x: float,
    y: float,
    place: StagePlace,
    sb: StageLike | None,
    neck: bool = False,
    members: int = 1,
) -> str:
    """Stage ``name``'s box with its top-left corner at ``x``, ``y``; ``sb`` its breakdown
    (``None``: no state query), ``neck`` whether it is (part of) the bottleneck, ``members``
    how many stages it stands for (a family's: its figures each on average)."""
    e = escape
    stroke = DEVICE_STROKE if place.device else HOST_STROKE
    role = place.role
    where = f"{place.resource} · {place.kind}"
    if members > 1:
        where = f"{members} stages · {place.kind}"
    stack = "".join(  # the boxes behind: it stands for many
        f'<rect class="ss-stack" x="{d}" y="{-d}" width="{BOX_W}" height="{BOX_H}" rx="8" '
        f'fill="#ffffff" stroke="{stroke}" stroke-width="0.8"/>'
        for d in ((6, 3) if members > 1 else ())
    )
    many = f' data-members="{members}"' if members > 1 else ""
    parts = [
        f'<g class="ss-stage{" ss-bottleneck" if neck else ""}" data-stage="{e(name)}"{many} '
        f'transform="translate({x:.1f},{y:.1f})">'
        f"<title>{e(chr(10).join(_tooltip(name, place, sb, neck, members)))}</title>{stack}"
        f'<rect class="ss-stage-box" width="{BOX_W}" height="{BOX_H}" rx="8" fill="#ffffff" '
        f'stroke="{stroke}" stroke-width="{2 if place.device else 1.4}"/>'
        f'<text x="10" y="22" class="ss-stage-name">{e(_short(name, 24))}</text>'
        f'<text x="10" y="39" class="ss-small">{e(_short(where, 30))}'
        f"{'' if role == 'stage' else ' · ' + e(role)}</text>"
    ]
    has_states = sb is not None and any(getattr(sb, s) is not None for s, _ in STATES)
    if sb is not None and has_states:
        parts += _state_bars(sb)
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


def _tooltip(
    name: str, place: StagePlace, sb: StageLike | None, neck: bool, members: int
) -> list[str]:
    tip = [f"stage {name}", f"resource {place.resource} ({place.kind})", f"role {place.role}"]
    if members > 1:
        tip[0] = f"stages {name}: a family of {members}, each on average"
    if sb is not None:
        tip += [f"{label} {pct(getattr(sb, label))}" for label, _ in STATES]
        tip += [
            f"{label} {pct(_frac(getattr(sb, label, None)))}"
            for label, _ in CATEGORIES
            if getattr(sb, label, None) is not None
        ]
    if neck:
        tip.append("the bottleneck (see the findings)")
    return tip


def _state_bars(sb: StageLike) -> list[str]:
    """The state bar and its figures; the category bar and its figures where known."""
    parts = bar(10, 50, BOX_W - 20, 16, ((s, getattr(sb, s), c) for s, c in STATES))
    parts.append(
        f'<text x="10" y="82" class="ss-small">busy {pct(sb.busy)} · in {pct(sb.blocked_in)} · '
        f"out {pct(sb.blocked_out)}</text>"
    )
    cats = {c: _frac(getattr(sb, c, None)) for c, _ in CATEGORIES}
    if any(v is not None for v in cats.values()):
        parts += bar(10, 90, BOX_W - 20, 6, ((c, cats[c], k) for c, k in CATEGORIES))
        parts.append(
            f'<text x="10" y="107" class="ss-tiny">comp {pct(cats["computation"])} · '
            f"comm {pct(cats['communication'])} · other {pct(cats['other'])}</text>"
        )
    return parts
