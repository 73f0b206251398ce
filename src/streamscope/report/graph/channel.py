"""A channel drawn as an arrow between its stages' boxes, with its figures on its edge: its
mean occupancy against its capacity (a fill bar, the maximum marked) and its throughput. A link
channel is dashed and carries its virtual queue's verdict; a channel without figures is a
plain arrow (its name and capacity in its tooltip). A family of channels is one thicker arrow
that says how many it stands for, its figures each on average.

In: a channel, the points its arrow passes and its summary. Out: SVG text; every name escaped.
"""

from __future__ import annotations

from html import escape
from typing import Protocol

from streamscope.core.fmt import fmt_num, pct
from streamscope.core.topology import ChannelInfo
from streamscope.report.graph.style import DEVICE_STROKE, FILL, VERDICT_COLOURS

#: The label on a channel's edge (px), and its fill bar's width.
LABEL_W, LABEL_H, FILL_W = 184, 50, 96


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


def _num(x: float | None, unit: str = "") -> str:
    return "-" if x is None else fmt_num(float(x)) + unit


def path(pts: list[tuple[float, float]]) -> str:
    """A smooth path through ``pts``, left to right: each step a curve leaving and reaching its
    points level."""
    (x, y), rest = pts[0], pts[1:]
    d = [f"M{x:.1f},{y:.1f}"]
    for nx, ny in rest:
        dx = (nx - x) / 2
        d.append(f"C{x + dx:.1f},{y:.1f} {nx - dx:.1f},{ny:.1f} {nx:.1f},{ny:.1f}")
        x, y = nx, ny
    return " ".join(d)


def channel(
    c: ChannelInfo, pts: list[tuple[float, float]], cs: ChannelLike | None, members: int = 1
) -> tuple[str, str]:
    """The arrow (drawn under the boxes) and the label (drawn over them) of one channel whose
    arrow passes ``pts`` (from its source's port to its destination's): its figures on its
    edge, halfway along its first step. ``members``: how many channels it stands for."""
    virtual = c.is_link or (cs is not None and cs.virtual)
    colour = DEVICE_STROKE if virtual else "#475569"
    dash = ' stroke-dasharray="7 4"' if virtual else ""
    many = f' data-members="{members}"' if members > 1 else ""
    what = f"{members} channels, {escape(c.name)}" if members > 1 else escape(c.name)
    arrow = (
        f'<path class="ss-channel-line" d="{path(pts)}" fill="none" stroke="{colour}" '
        f'stroke-width="{3.2 if members > 1 else 1.6}"{dash} '
        f'marker-end="url(#ss-arrow{"-dev" if virtual else ""})">'
        f"<title>{what} · capacity {c.capacity}</title></path>"
    )
    tip = escape(chr(10).join(_tooltip(c, cs, members)))
    mean = cs.mean_occupancy if cs is not None else None
    tput = cs.throughput_per_s if cs is not None else None
    if cs is None or (mean is None and tput is None and not virtual):
        plain = (
            f'<g class="ss-channel ss-plain" data-channel="{escape(c.name)}"{many} '
            f'data-virtual="{"1" if virtual else "0"}"><title>{tip}</title></g>'
        )
        return arrow, plain
    (ax, ay), (bx, by) = pts[0], pts[1]
    x, y = (ax + bx) / 2 - LABEL_W / 2, (ay + by) / 2 - LABEL_H / 2
    label = [
        f'<g class="ss-channel" data-channel="{escape(c.name)}"{many} '
        f'data-virtual="{"1" if virtual else "0"}" transform="translate({x:.1f},{y:.1f})">'
        f"<title>{tip}</title>"
        f'<rect width="{LABEL_W}" height="{LABEL_H}" rx="5" fill="#ffffff" fill-opacity="0.94" '
        f'stroke="{colour}" stroke-width="0.8"{dash}/>',
        *_fill(cs, c.capacity),
    ]
    line2 = f"{_num(tput, '/s')}" if tput is not None else "throughput -"
    if members > 1:  # its figures are each channel's on average
        line2 = f"{members} channels · {line2} each"
    label.append(f'<text x="6" y="38" class="ss-small">{escape(line2)}</text>')
    if virtual:
        verdict = cs.verdict
        vcol = VERDICT_COLOURS.get(verdict or "", "#64748b")
        label.append(
            f'<text x="{LABEL_W - 6}" y="38" text-anchor="end" class="ss-small ss-vq" '
            f'fill="{vcol}">VQ {escape(verdict or "unchecked")}</text>'
        )
    label.append("</g>")
    return arrow, "".join(label)


def _tooltip(c: ChannelInfo, cs: ChannelLike | None, members: int = 1) -> list[str]:
    tip = [f"channel {c.name}", f"{c.transport}, capacity {c.capacity}"]
    if members > 1:
        tip[0] = f"channels {c.name}: a family of {members}, each on average (max: the largest)"
    if c.is_link:
        tip.append(
            f"link: bulk {c.bulk_size}, transfer {c.transfer_ns / 1e3:.0f}us, "
            f"latency {c.latency_ns / 1e3:.0f}us"
        )
    if cs is None:
        return tip
    tip += [
        f"mean occupancy {_num(cs.mean_occupancy)}",
        f"max occupancy {_num(cs.max_occupancy)}",
        f"full {pct(cs.full_fraction)}, empty {pct(cs.empty_fraction)}",
        f"throughput {_num(cs.throughput_per_s, '/s')}",
    ]
    for extra in ("transferring", "idle", "blocking"):
        v = getattr(cs, extra, None)
        if isinstance(v, (int, float)):
            tip.append(f"{extra} {pct(float(v))}")
    if cs.verdict:
        tip.append(f"virtual queue: {cs.verdict}")
    return tip


def _fill(cs: ChannelLike, cap: int) -> list[str]:
    """The fill bar: the mean occupancy against the capacity, a tick at the maximum; and the
    figures beside it."""
    out = [
        f'<rect class="ss-fill-bg" x="6" y="7" width="{FILL_W}" height="12" fill="#f1f5f9" '
        'stroke="#94a3b8" stroke-width="0.6"/>'
    ]
    mean, mx = cs.mean_occupancy, cs.max_occupancy
    if mean is not None and cap:
        fw = FILL_W * min(max(mean / cap, 0.0), 1.0)
        out.append(
            f'<rect class="ss-fill" x="6" y="7" width="{fw:.1f}" height="12" fill="{FILL}"/>'
        )
        if mx is not None:
            mx_x = 6 + FILL_W * min(max(mx / cap, 0.0), 1.0)
            out.append(
                f'<line x1="{mx_x:.1f}" y1="4" x2="{mx_x:.1f}" y2="22" stroke="#0f172a" '
                'stroke-width="1.2"/>'
            )
        occ = f"{_num(mean)}/{cap}"
    else:
        occ = f"?/{cap}"
    out.append(f'<text x="{FILL_W + 12}" y="18" class="ss-small">{escape(occ)}</text>')
    return out
