"""What every figure of the report shares: its layout, colours, number rounding and axis scales.

In: titles, values and units. Out: pieces of plain plotly figure specifications (dicts), and
user text escaped for plotly's pseudo-HTML labels.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from streamscope.report.data import TargetSeries

#: A plotly figure specification: ``{"data": [...], "layout": {...}}``.
Figure = dict[str, Any]

PALETTE = (
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
    "#475569", "#ea580c",
)  # fmt: skip


def label(s: str) -> str:
    """User text for a plotly label: plotly reads ``<``..``>`` as markup and decodes entities."""
    return escape(s, quote=False)


def r6(x: float | None) -> float | None:
    """A number rounded to 6 significant digits (``None`` stays ``None``)."""
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.6g}")


def rs(xs: Sequence[float | None]) -> list[float | None]:
    return [r6(x) for x in xs]


def base_layout(title: str, height: int = 320, **extra: Any) -> dict[str, Any]:
    layout: dict[str, Any] = {
        "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"},
        "height": height,
        "margin": {"l": 64, "r": 24, "t": 44, "b": 96},
        "hovermode": "x unified",
        "legend": {"orientation": "h", "y": -0.3, "yanchor": "top", "x": 0},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "xaxis": {"gridcolor": "#e5e7eb", "zeroline": False},
        "yaxis": {"gridcolor": "#e5e7eb", "zeroline": False},
    }
    layout.update(extra)
    return layout


def ns_scale(values: Sequence[float | None]) -> tuple[float, str]:
    """Divisor and unit that read best for nanosecond values."""
    finite = [abs(v) for v in values if v is not None and math.isfinite(v)]
    top = max(finite, default=0.0)
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if top >= scale:
            return scale, unit
    return 1.0, "ns"


def scaled(values: Sequence[float | None], scale: float) -> list[float | None]:
    """Each value divided by ``scale``, rounded (``None`` stays ``None``)."""
    return [None if v is None else r6(v / scale) for v in values]


def frame_times(ts: TargetSeries) -> list[float | None]:
    """Frame start times in seconds since the run's start."""
    return [r6(t / 1e9) for t in ts.t_start_ns]


def colour(i: int) -> str:
    """The ``i``-th colour of the palette, round again when it runs out."""
    return PALETTE[i % len(PALETTE)]


def unit_label(unit: str) -> str:
    """What a query's unit measures, for an axis title."""
    return {"items/s": "items/s", "items": "items", "ns": "time", "state": "fraction"}.get(
        unit, unit
    )
