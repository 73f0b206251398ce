"""Plotly figure specifications (plain ``{"data": [...], "layout": {...}}`` dicts) for a report.

Built as dicts rather than ``plotly.graph_objects`` so a report of hundreds of figures stays fast;
``plotly.graph_objects.Figure(spec)`` accepts each one (the tests check that). Text that came
from the user (targets, stage names) is escaped for plotly's pseudo-HTML labels with
``label()``; numbers are rounded to 6 significant digits to keep the page small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from typing import Any

from streamscope.core.fmt import fmt_ns
from streamscope.report.data import (
    BOX_STATS,
    CLOCK_STATS,
    SELF_CHECK_STATS,
    ClockDomain,
    Levels,
    QuerySeries,
    TargetSeries,
)

Figure = dict[str, Any]

PALETTE = (
    "#2563eb", "#dc2626", "#059669", "#d97706", "#7c3aed", "#0891b2", "#db2777", "#65a30d",
    "#475569", "#ea580c",
)  # fmt: skip
STATE_COLOURS = {
    "busy": "#2563eb",
    "blocked_in": "#f59e0b",
    "blocked_out": "#dc2626",
    "idle": "#9ca3af",
}
#: Time-weighted metrics: their histogram weights are ns, shown as a fraction of the time.
TIME_WEIGHTED = ("occupancy",)


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


def _scaled(values: Sequence[float | None], scale: float) -> list[float | None]:
    return [None if v is None else r6(v / scale) for v in values]


def _times(ts: TargetSeries) -> list[float | None]:
    """Frame start times in seconds since the run's start."""
    return [r6(t / 1e9) for t in ts.t_start_ns]


def _colour(i: int) -> str:
    return PALETTE[i % len(PALETTE)]


def _unit_label(unit: str) -> str:
    return {"items/s": "items/s", "items": "items", "ns": "time", "state": "fraction"}.get(
        unit, unit
    )


def partial_notes(ts: TargetSeries) -> list[str]:
    """Per frame: empty for a whole frame; for a partial one (the run began or ended inside
    it), how much of it was observed, as hover text."""
    out = []
    for t0, t1, cov in zip(ts.t_start_ns, ts.t_end_ns, ts.covered_ns, strict=True):
        whole = t1 - t0
        out.append("" if cov >= whole else f" (partial: {fmt_ns(cov)} of {fmt_ns(whole)})")
    return out


def timeseries(q: QuerySeries) -> Figure | None:
    """Every scalar and quantile of the query per frame, one line per target and stat."""
    skip = set(SELF_CHECK_STATS) | set(CLOCK_STATS)
    rows: list[tuple[TargetSeries, str]] = []
    for ts in q.targets:
        for stat in ts.stats:
            if stat.startswith("duty.") or stat in skip:
                continue
            if any(v is not None for v in ts.stats[stat]):
                rows.append((ts, stat))
    if not rows:
        return None
    scale, unit = (1.0, _unit_label(q.unit))
    if q.unit == "ns":
        scale, unit = ns_scale([v for ts, s in rows for v in ts.stats[s]])
    data = []
    for i, (ts, stat) in enumerate(rows):
        name = stat if len(q.targets) == 1 else f"{label(ts.target)} {stat}"
        notes = partial_notes(ts)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": name,
                "x": _times(ts),
                "y": _scaled(ts.stats[stat], scale),
                "customdata": [[f, n] for f, n in zip(ts.frames, notes, strict=True)],
                "hovertemplate": (
                    f"frame %{{customdata[0]}}%{{customdata[1]}}: %{{y}} {unit}<extra>{name}</extra>"
                ),
                "line": {"width": 1.6, "color": _colour(i)},
                # a partial frame (the run's first or last: part of it observed) is hollow
                "marker": {
                    "size": [7 if n else 4 for n in notes],
                    "symbol": ["circle-open" if n else "circle" for n in notes],
                },
                "connectgaps": False,
            }
        )
    layout = base_layout(f"q{q.id} per frame", 320)
    layout["xaxis"]["title"] = {"text": "frame start (s since the run's start)"}
    layout["yaxis"]["title"] = {"text": unit}
    return {"data": data, "layout": layout}


def duty(q: QuerySeries, ts: TargetSeries) -> Figure | None:
    """A stage's states per frame, stacked (fractions of the observed time)."""
    states = [s for s in STATE_COLOURS if f"duty.{s}" in ts.stats]
    states += sorted(s[5:] for s in ts.stats if s.startswith("duty.") and s[5:] not in states)
    if not states or not ts.frames:
        return None
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "stackgroup": "duty",
            "name": label(s),
            "x": _times(ts),
            "y": rs(ts.stat(f"duty.{s}")),
            "line": {"width": 0.5, "color": STATE_COLOURS.get(s, "#64748b")},
            "hovertemplate": "%{y:.1%}",
        }
        for s in states
    ]
    layout = base_layout(f"q{q.id} {label(ts.target)}: time in each state", 280)
    layout["xaxis"]["title"] = {"text": "frame start (s)"}
    layout["yaxis"].update({"title": {"text": "fraction"}, "range": [0, 1], "tickformat": ".0%"})
    return {"data": data, "layout": layout}


def histograms(q: QuerySeries) -> list[Figure]:
    """Per target with a histogram: the whole run's distribution (bars, outside weight
    labelled) and, with several frames, one column per frame (heatmap)."""
    out: list[Figure] = []
    weighted = q.metric in TIME_WEIGHTED
    what = "fraction of the time" if weighted else "fraction of the items"
    for ts in q.targets:
        if not ts.edges or not ts.weights:
            continue
        nb = len(ts.edges) - 1
        total = [0.0] * nb
        for fw in ts.weights:
            for i, v in enumerate(fw[:nb]):
                total[i] += v
        under, over = sum(ts.under), sum(ts.over)
        grand = sum(total) + under + over
        if grand <= 0:
            continue
        scale, unit = (1.0, "items") if q.unit != "ns" else ns_scale(ts.edges)
        lo = [e / scale for e in ts.edges[:-1]]
        width = [(b - a) / scale for a, b in zip(ts.edges[:-1], ts.edges[1:], strict=True)]
        integer_levels = q.unit == "items" and all(
            float(e).is_integer() and wd == 1 for e, wd in zip(ts.edges[:-1], width, strict=True)
        )
        x = lo if integer_levels else [a + wd / 2 for a, wd in zip(lo, width, strict=True)]
        note = []
        if under:
            note.append(f"below range {under / grand:.1%}")
        if over:
            note.append(f"above range {over / grand:.1%}")
        bars: Figure = {
            "data": [
                {
                    "type": "bar",
                    "name": label(ts.target),
                    "x": rs(x),
                    "width": rs(width),
                    "y": rs([t / grand for t in total]),
                    "marker": {"color": "#0ea5e9"},
                    "hovertemplate": f"%{{x}} {unit}: %{{y:.2%}}<extra></extra>",
                }
            ],
            "layout": base_layout(
                f"q{q.id} {label(ts.target)}: histogram over the run"
                + (f" ({', '.join(note)})" if note else ""),
                300,
                bargap=0.05,
                hovermode="closest",
            ),
        }
        bars["layout"]["xaxis"]["title"] = {"text": "level (items)" if integer_levels else unit}
        bars["layout"]["yaxis"].update({"title": {"text": what}, "tickformat": ".0%"})
        out.append(bars)
        if len(ts.frames) > 1:
            z = []
            for w, u, o in zip(ts.weights, ts.under, ts.over, strict=True):
                s = sum(w) + u + o
                z.append([r6(v / s) if s > 0 else None for v in w[:nb]])
            zt = [list(col) for col in zip(*z, strict=True)] if z else []
            heat: Figure = {
                "data": [
                    {
                        "type": "heatmap",
                        "x": _times(ts),
                        "y": rs(x),
                        "z": zt,
                        "colorscale": [[0, "#f8fafc"], [1, "#1d4ed8"]],
                        "colorbar": {"title": {"text": "fraction"}, "tickformat": ".0%"},
                        "hovertemplate": "t=%{x}s, %{y}: %{z:.1%}<extra></extra>",
                    }
                ],
                "layout": base_layout(
                    f"q{q.id} {label(ts.target)}: histogram per frame", 300, hovermode="closest"
                ),
            }
            heat["layout"]["xaxis"]["title"] = {"text": "frame start (s)"}
            heat["layout"]["yaxis"]["title"] = {"text": "level (items)" if integer_levels else unit}
            out.append(heat)
    return out


def has_box(ts: TargetSeries) -> bool:
    return all(s in ts.stats for s in BOX_STATS)


def box(q: QuerySeries) -> Figure | None:
    """Box-whisker per frame (seed 000, Fig. 2): whiskers min and max, box the quartiles."""
    targets = [ts for ts in q.targets if has_box(ts)]
    if not targets:
        return None
    vals = [v for ts in targets for s in BOX_STATS for v in ts.stats[s]]
    scale, unit = ns_scale(vals) if q.unit == "ns" else (1.0, _unit_label(q.unit))
    data = []
    for i, ts in enumerate(targets):
        keep = [
            k for k in range(len(ts.frames)) if all(ts.stats[s][k] is not None for s in BOX_STATS)
        ]
        if not keep:
            continue

        def col(stat: str, keep: list[int] = keep, ts: TargetSeries = ts) -> list[float | None]:
            return _scaled([ts.stats[stat][k] for k in keep], scale)

        data.append(
            {
                "type": "box",
                "name": label(ts.target),
                "x": [r6(ts.t_start_ns[k] / 1e9) for k in keep],
                "lowerfence": col("p0"),
                "q1": col("p25"),
                "median": col("p50"),
                "q3": col("p75"),
                "upperfence": col("p100"),
                "marker": {"color": _colour(i)},
                "line": {"width": 1.2},
            }
        )
    if not data:
        return None
    layout = base_layout(
        f"q{q.id} box-whisker per frame (min, quartiles, max)", 340, boxmode="group"
    )
    layout["hovermode"] = "closest"
    layout["xaxis"]["title"] = {"text": "frame start (s)"}
    layout["yaxis"]["title"] = {"text": f"{_unit_label(q.unit)} ({unit})"}
    return {"data": data, "layout": layout}


def clock_stats(q: QuerySeries) -> Figure | None:
    """Timing uncertainty and clock violations of a cross-domain channel, per frame."""
    data: list[dict[str, Any]] = []
    for ts in q.targets:
        unc = ts.stats.get("uncertainty_ns")
        vio = ts.stats.get("violations")
        if unc and any(v is not None for v in unc):
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "name": f"{label(ts.target)} uncertainty (us)",
                    "x": _times(ts),
                    "y": _scaled(unc, 1e3),
                }
            )
        if vio and any(v for v in vio):
            data.append(
                {
                    "type": "bar",
                    "name": f"{label(ts.target)} violations",
                    "x": _times(ts),
                    "y": rs(vio),
                    "yaxis": "y2",
                    "opacity": 0.6,
                }
            )
    if not data:
        return None
    layout = base_layout(f"q{q.id} clock uncertainty and violations per frame", 280)
    layout["yaxis"]["title"] = {"text": "uncertainty (us)"}
    layout["yaxis2"] = {"title": {"text": "violations"}, "overlaying": "y", "side": "right"}
    layout["xaxis"]["title"] = {"text": "frame start (s)"}
    return {"data": data, "layout": layout}


def vq_selfcheck(target: str, frames: list[dict[str, Any]]) -> Figure:
    """A virtual queue's self-check per frame: W1 against its rejection threshold."""
    x = [f["frame"] for f in frames]
    rej = [f for f in frames if f.get("verdict") == "rejected"]
    data: list[dict[str, Any]] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "W1 measured vs predicted buffers",
            "x": x,
            "y": rs([f.get("w1_items") for f in frames]),
            "line": {"color": "#2563eb"},
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "threshold (reject above)",
            "x": x,
            "y": rs([f.get("threshold_items") for f in frames]),
            "line": {"color": "#dc2626", "dash": "dash", "shape": "hvh"},
        },
        {
            "type": "scatter",
            "mode": "markers",
            "name": "rejected frame",
            "x": [f["frame"] for f in rej],
            "y": rs([f.get("w1_items") for f in rej]),
            "marker": {"color": "#dc2626", "size": 10, "symbol": "x"},
        },
    ]
    truth = [f.get("w1_truth_items") for f in frames]
    if any(v is not None for v in truth):
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "W1 predicted vs truth",
                "x": x,
                "y": rs(truth),
                "line": {"color": "#059669", "dash": "dot"},
            }
        )
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": "W1 ideal queue vs truth",
                "x": x,
                "y": rs([f.get("w1_truth_ideal_items") for f in frames]),
                "line": {"color": "#9ca3af", "dash": "dot"},
            }
        )
    layout = base_layout(f"{label(target)}: self-check per frame (W1, items)", 300)
    layout["xaxis"]["title"] = {"text": "frame"}
    layout["yaxis"]["title"] = {"text": "items"}
    return {"data": data, "layout": layout}


def vq_means(target: str, frames: list[dict[str, Any]]) -> Figure:
    """Mean occupancy per frame: predicted (tandem, ideal), measured buffers, truth."""
    x = [f["frame"] for f in frames]
    series = (
        ("predicted_mean", "predicted (tandem)", "#2563eb", "solid"),
        ("ideal_mean", "ideal queue", "#9ca3af", "dash"),
        ("tail_mean", "tail buffer (measured)", "#d97706", "solid"),
        ("head_mean", "head buffer (measured)", "#7c3aed", "solid"),
        ("truth_mean", "truth", "#059669", "dot"),
    )
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": x,
            "y": rs([f.get(key) for f in frames]),
            "line": {"color": colour, "dash": dash},
        }
        for key, name, colour, dash in series
        if any(f.get(key) is not None for f in frames)
    ]
    layout = base_layout(f"{label(target)}: mean occupancy per frame", 300)
    layout["xaxis"]["title"] = {"text": "frame"}
    layout["yaxis"]["title"] = {"text": "items"}
    return {"data": data, "layout": layout}


#: Panels of the level figure: (title, [(series, name, colour, dash)]).
LEVEL_PANELS = (
    (
        "tail buffer",
        (("tail", "measured", "#d97706", "solid"), ("tail_predicted", "predicted", "#2563eb", "dash")),
    ),
    (
        "head buffer",
        (("head", "measured", "#7c3aed", "solid"), ("head_predicted", "predicted", "#2563eb", "dash")),
    ),
    (
        "whole queue",
        (
            ("predicted", "predicted (tandem)", "#2563eb", "solid"),
            ("ideal", "ideal queue", "#9ca3af", "dash"),
            ("truth", "truth", "#059669", "dot"),
        ),
    ),
)  # fmt: skip
MAX_FRAME_BUTTONS = 120


def vq_levels(target: str, levels: Levels) -> Figure:
    """Predicted vs measured sub-queue level distributions (and the truth when recorded), over
    the whole run, with a menu to show any single frame."""
    data: list[dict[str, Any]] = []
    keys: list[str] = []
    layout = base_layout(f"{label(target)}: level distributions, predicted vs measured", 360)
    layout["hovermode"] = "closest"
    annotations = []
    n = len(LEVEL_PANELS)
    for p, (title, series) in enumerate(LEVEL_PANELS):
        ax = "" if p == 0 else str(p + 1)
        lo, hi = p / n + 0.02, (p + 1) / n - 0.02
        layout[f"xaxis{ax}"] = {
            "domain": [lo, hi],
            "anchor": f"y{ax}",
            "title": {"text": "level (items)"},
            "gridcolor": "#e5e7eb",
        }
        layout[f"yaxis{ax}"] = {
            "anchor": f"x{ax}",
            "gridcolor": "#e5e7eb",
            "tickformat": ".0%",
            **({"title": {"text": "fraction of the time"}} if p == 0 else {}),
        }
        annotations.append(
            {
                "text": title,
                "xref": "paper",
                "yref": "paper",
                "x": (lo + hi) / 2,
                "y": 1.0,
                "showarrow": False,
                "yanchor": "bottom",
            }
        )
        for key, name, colour, dash in series:
            if key not in levels.overall:
                continue
            ys = levels.overall[key]
            keys.append(key)
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{title}: {name}",
                    "x": list(range(len(ys))),
                    "y": rs(ys),
                    "xaxis": f"x{ax}",
                    "yaxis": f"y{ax}",
                    "line": {"color": colour, "dash": dash, "shape": "hvh", "width": 1.8},
                    "hovertemplate": "level %{x}: %{y:.2%}",
                }
            )
    layout["annotations"] = annotations
    layout["margin"] = {"l": 64, "r": 24, "t": 90, "b": 110}
    frames = levels.frames
    if len(frames) > 1:
        step = max(1, math.ceil(len(frames) / MAX_FRAME_BUTTONS))
        buttons = [
            {
                "label": "all frames",
                "method": "restyle",
                "args": [
                    {
                        "x": [list(range(len(levels.overall[k]))) for k in keys],
                        "y": [rs(levels.overall[k]) for k in keys],
                    }
                ],
            }
        ]
        for f in frames[::step]:
            fys = [levels.per_frame.get(k, {}).get(f, []) for k in keys]
            buttons.append(
                {
                    "label": f"frame {f}",
                    "method": "restyle",
                    "args": [{"x": [list(range(len(y))) for y in fys], "y": [rs(y) for y in fys]}],
                }
            )
        layout["updatemenus"] = [
            {"buttons": buttons, "direction": "down", "x": 1.0, "xanchor": "right", "y": 1.2}
        ]
    return {"data": data, "layout": layout}


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
        lo = [ex["lo_ns"][k] / 1e3 for k in sel]
        hi = [ex["hi_ns"][k] / 1e3 for k in sel]
        xs = list(range(idx, idx + len(sel)))
        idx += len(sel) + 20
        mid = [(a + c) / 2 for a, c in zip(lo, hi, strict=True)]
        half = [(c - a) / 2 for a, c in zip(lo, hi, strict=True)]
        data.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": f"burst {b} ({len(sel)} round trips)",
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
                "marker": {"size": 3, "color": _colour(i)},
                "hovertemplate": "t=%{customdata}s: [%{y} ± %{error_y.array}] us<extra></extra>",
            }
        )
        w = widths.get(b)
        if w is not None and math.isfinite(float(w)):
            data.extend(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"burst {b} hard bounds (±{float(w) / 2e3:.3g} us)",
                    "showlegend": sign == 1,
                    "legendgroup": f"b{b}",
                    "x": [xs[0], xs[-1]],
                    "y": [r6(sign * float(w) / 2e3)] * 2,
                    "line": {"color": _colour(i), "dash": "dash", "width": 1.2},
                    "hoverinfo": "skip",
                }
                for sign in (1, -1)
            )
    layout = base_layout(
        f"clock {label(cd.domain)}: round trips around each burst's fit (host us)",
        340,
        hovermode="closest",
    )
    layout["xaxis"]["title"] = {"text": "round trip (by burst)"}
    layout["yaxis"]["title"] = {"text": "[t1, t3] − fit(t2) (us)"}
    return {"data": data, "layout": layout}


def compare_bars(rows: list[dict[str, Any]]) -> Figure | None:
    """Relative change b vs a of every compared number, coloured by its verdict."""
    colours = {"better": "#15803d", "worse": "#b91c1c", "same": "#9ca3af"}
    xs: list[int] = []
    ys: list[float | None] = []
    cs: list[str] = []
    texts: list[str] = []
    for r in rows:
        a, b = r.get("a"), r.get("b")
        if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a == 0:
            continue
        xs.append(len(xs))
        ys.append(r6((b - a) / abs(a)))
        cs.append(colours.get(str(r.get("verdict")), "#64748b"))
        texts.append(
            label(" ".join(str(r.get(k, "")) for k in ("query", "target", "stat") if r.get(k)))
        )
    if not xs:
        return None
    data = [
        {
            "type": "bar",
            "x": xs,
            "y": ys,
            "marker": {"color": cs},
            "text": texts,
            "hovertemplate": "%{text}: %{y:+.1%}<extra></extra>",
        }
    ]
    layout = base_layout("relative change, other run vs this run", 300, hovermode="closest")
    layout["xaxis"].update({"showticklabels": False, "title": {"text": "compared number"}})
    layout["yaxis"].update({"tickformat": "+.0%", "title": {"text": "(b − a) / |a|"}})
    return {"data": data, "layout": layout}
