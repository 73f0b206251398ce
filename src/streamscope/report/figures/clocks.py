"""The figures of a calibrated clock domain: its fit per calibration burst, and every round
trip around its burst's fit.

In: a ``ClockDomain``. Out: plotly figure specifications.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from streamscope.report.data import ClockDomain
from streamscope.report.figures.spec import Figure, base_layout, colour, label, r6, rs


def clock_fits(cd: ClockDomain) -> Figure:
    """Per calibration burst: the fitted rate's error from the nominal tick (ppm) and the
    width of the hard bounds."""
    bursts = [int(f["burst"]) for f in cd.fits]
    ppm = [
        (float(f["s_ns_per_tick"]) / cd.tick_period_ns - 1.0) * 1e6
        if f["s_ns_per_tick"] is not None and cd.tick_period_ns
        else None
        for f in cd.fits
    ]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "fitted rate vs nominal (ppm)",
            "x": bursts,
            "y": rs(ppm),
            "line": {"color": "#2563eb"},
        },
        {
            "type": "bar",
            "name": "bound width (us)",
            "x": bursts,
            "y": rs([None if f["bound_width_ns"] is None else f["bound_width_ns"] / 1e3
                     for f in cd.fits]),
            "yaxis": "y2",
            "marker": {"color": "#f59e0b"},
            "opacity": 0.5,
        },
    ]  # fmt: skip
    layout = base_layout(f"clock {label(cd.domain)}: fit per calibration burst", 300)
    layout["xaxis"]["title"] = {"text": "burst"}
    layout["xaxis"]["dtick"] = 1
    layout["yaxis"]["title"] = {"text": "rate error (ppm)"}
    layout["yaxis2"] = {"title": {"text": "bound width (us)"}, "overlaying": "y", "side": "right"}
    layout["margin"]["r"] = 64
    return {"data": data, "layout": layout}


def clock_exchanges(cd: ClockDomain) -> Figure | None:
    """Every round trip of a domain's calibration, as the interval it allows around its
    burst's fit ([t1, t3] minus the fitted host time of the reply), with the fit's bounds."""
    ex = cd.exchanges
    if not ex or not ex["burst"]:
        return None
    data: list[dict[str, Any]] = []
    bursts = sorted({int(b) for b in ex["burst"]})
    widths = {int(f["burst"]): f["bound_width_ns"] for f in cd.fits}
    idx = 0
    for i, b in enumerate(bursts):
        sel = [k for k, v in enumerate(ex["burst"]) if int(v) == b]
        xs = list(range(idx, idx + len(sel)))
        idx += len(sel) + 20  # a gap between bursts
        data.append(_round_trips(ex, b, sel, xs, colour(i)))
        w = widths.get(b)
        if w is not None and math.isfinite(float(w)):
            data.extend(_bounds(b, float(w), xs, colour(i)))
    layout = base_layout(
        f"clock {label(cd.domain)}: round trips around each burst's fit (host us)",
        340,
        hovermode="closest",
    )
    layout["xaxis"]["title"] = {"text": "round trip (by burst)"}
    layout["yaxis"]["title"] = {"text": "[t1, t3] − fit(t2) (us)"}
    return {"data": data, "layout": layout}


def _round_trips(
    ex: Mapping[str, Sequence[float]], burst: int, sel: list[int], xs: list[int], col: str
) -> dict[str, Any]:
    """Burst ``burst``'s round trips (indices ``sel`` of ``ex``), each an interval in us."""
    lo = [ex["lo_ns"][k] / 1e3 for k in sel]
    hi = [ex["hi_ns"][k] / 1e3 for k in sel]
    mid = [(a + c) / 2 for a, c in zip(lo, hi, strict=True)]
    half = [(c - a) / 2 for a, c in zip(lo, hi, strict=True)]
    return {
        "type": "scatter",
        "mode": "markers",
        "name": f"burst {burst} ({len(sel)} round trips)",
        "x": xs,
        "y": rs(mid),
        "customdata": rs([ex["t_s"][k] for k in sel]),
        "error_y": {
            "type": "data",
            "array": rs(half),
            "visible": True,
            "thickness": 0.6,
            "width": 0,
        },
        "marker": {"size": 3, "color": col},
        "hovertemplate": "t=%{customdata}s: [%{y} ± %{error_y.array}] us<extra></extra>",
    }


def _bounds(burst: int, width_ns: float, xs: list[int], col: str) -> list[dict[str, Any]]:
    """The burst fit's hard bounds, ± half their width, across its round trips."""
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"burst {burst} hard bounds (±{width_ns / 2e3:.3g} us)",
            "showlegend": sign == 1,
            "legendgroup": f"b{burst}",
            "x": [xs[0], xs[-1]],
            "y": [r6(sign * width_ns / 2e3)] * 2,
            "line": {"color": col, "dash": "dash", "width": 1.2},
            "hoverinfo": "skip",
        }
        for sign in (1, -1)
    ]
