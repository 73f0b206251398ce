"""The figures of one query: its stats per frame, a stage's states, histograms, box-whiskers,
and a cross-domain channel's timing uncertainty.

In: a ``QuerySeries``. Out: plotly figure specifications (``None`` or none where the query
has nothing to draw).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamscope.core.fmt import fmt_ns
from streamscope.report.data import (
    BOX_STATS,
    CLOCK_STATS,
    SELF_CHECK_STATS,
    QuerySeries,
    TargetSeries,
)
from streamscope.report.families import about
from streamscope.report.figures.spec import (
    Figure,
    base_layout,
    colour,
    frame_times,
    label,
    ns_scale,
    r6,
    rs,
    scaled,
    unit_label,
)

STATE_COLOURS = {
    "busy": "#2563eb",
    "blocked_in": "#f59e0b",
    "blocked_out": "#dc2626",
    "idle": "#9ca3af",
}
#: Time-weighted metrics: their histogram weights are ns, shown as a fraction of the time.
TIME_WEIGHTED = ("occupancy",)


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
    scale, unit = (1.0, unit_label(q.unit))
    if q.unit == "ns":
        scale, unit = ns_scale([v for ts, s in rows for v in ts.stats[s]])
    data = []
    for i, (ts, stat) in enumerate(rows):
        if ts.members > 1:
            name = label(about(ts, q.metric, stat))
        else:
            name = stat if len(q.targets) == 1 else f"{label(ts.target)} {stat}"
        notes = partial_notes(ts)
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": name,
                "x": frame_times(ts),
                "y": scaled(ts.stats[stat], scale),
                "customdata": [[f, n] for f, n in zip(ts.frames, notes, strict=True)],
                "hovertemplate": (
                    f"frame %{{customdata[0]}}%{{customdata[1]}}: %{{y}} {unit}<extra>{name}</extra>"
                ),
                "line": {"width": 1.6, "color": colour(i)},
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
            "x": frame_times(ts),
            "y": rs(ts.stat(f"duty.{s}")),
            "line": {"width": 0.5, "color": STATE_COLOURS.get(s, "#64748b")},
            "hovertemplate": "%{y:.1%}",
        }
        for s in states
    ]
    who = label(about(ts, q.metric, "duty.busy"))
    layout = base_layout(f"q{q.id} {who}: time in each state", 280)
    layout["xaxis"]["title"] = {"text": "frame start (s)"}
    layout["yaxis"].update({"title": {"text": "fraction"}, "range": [0, 1], "tickformat": ".0%"})
    return {"data": data, "layout": layout}


@dataclass(frozen=True, slots=True)
class _BinAxis:
    """Where a histogram's bins are drawn: each bin's position and width in ``unit``, and
    the axis title (integer levels of items are drawn at their level)."""

    x: list[float]
    width: list[float]
    unit: str
    title: str


def histograms(q: QuerySeries) -> list[Figure]:
    """Per target with a histogram: the whole run's distribution (bars, outside weight
    labelled) and, with several frames, one column per frame (heatmap)."""
    out: list[Figure] = []
    for ts in q.targets:
        if ts.edges and ts.weights:
            out += _histogram(q, ts)
    return out


def _histogram(q: QuerySeries, ts: TargetSeries) -> list[Figure]:
    nb = len(ts.edges) - 1
    total = [0.0] * nb
    for fw in ts.weights:
        for i, v in enumerate(fw[:nb]):
            total[i] += v
    under, over = sum(ts.under), sum(ts.over)
    grand = sum(total) + under + over
    if grand <= 0:
        return []
    bins = _bins(q, ts)
    note = []
    if under:
        note.append(f"below range {under / grand:.1%}")
    if over:
        note.append(f"above range {over / grand:.1%}")
    out = [_run_bars(q, ts, bins, [t / grand for t in total], note)]
    if len(ts.frames) > 1:
        out.append(_frame_heatmap(q, ts, bins, nb))
    return out


def _bins(q: QuerySeries, ts: TargetSeries) -> _BinAxis:
    scale, unit = (1.0, "items") if q.unit != "ns" else ns_scale(ts.edges)
    lo = [e / scale for e in ts.edges[:-1]]
    width = [(b - a) / scale for a, b in zip(ts.edges[:-1], ts.edges[1:], strict=True)]
    integer_levels = q.unit == "items" and all(
        float(e).is_integer() and wd == 1 for e, wd in zip(ts.edges[:-1], width, strict=True)
    )
    x = lo if integer_levels else [a + wd / 2 for a, wd in zip(lo, width, strict=True)]
    return _BinAxis(x, width, unit, "level (items)" if integer_levels else unit)


def _run_bars(
    q: QuerySeries, ts: TargetSeries, bins: _BinAxis, shares: list[float], note: list[str]
) -> Figure:
    """The whole run's distribution as bars; ``note`` says what fell outside the range."""
    weighted = q.metric in TIME_WEIGHTED
    what = "fraction of the time" if weighted else "fraction of the items"
    bars: Figure = {
        "data": [
            {
                "type": "bar",
                "name": label(about(ts, q.metric, "histogram")),
                "x": rs(bins.x),
                "width": rs(bins.width),
                "y": rs(shares),
                "marker": {"color": "#0ea5e9"},
                "hovertemplate": f"%{{x}} {bins.unit}: %{{y:.2%}}<extra></extra>",
            }
        ],
        "layout": base_layout(
            f"q{q.id} {label(about(ts, q.metric, 'histogram'))}: histogram over the run"
            + (f" ({', '.join(note)})" if note else ""),
            300,
            bargap=0.05,
            hovermode="closest",
        ),
    }
    bars["layout"]["xaxis"]["title"] = {"text": bins.title}
    bars["layout"]["yaxis"].update({"title": {"text": what}, "tickformat": ".0%"})
    return bars


def _frame_heatmap(q: QuerySeries, ts: TargetSeries, bins: _BinAxis, nb: int) -> Figure:
    """One column per frame, each bin's share of that frame's weight."""
    z = []
    for w, u, o in zip(ts.weights, ts.under, ts.over, strict=True):
        s = sum(w) + u + o
        z.append([r6(v / s) if s > 0 else None for v in w[:nb]])
    zt = [list(col) for col in zip(*z, strict=True)] if z else []
    heat: Figure = {
        "data": [
            {
                "type": "heatmap",
                "x": frame_times(ts),
                "y": rs(bins.x),
                "z": zt,
                "colorscale": [[0, "#f8fafc"], [1, "#1d4ed8"]],
                "colorbar": {"title": {"text": "fraction"}, "tickformat": ".0%"},
                "hovertemplate": "t=%{x}s, %{y}: %{z:.1%}<extra></extra>",
            }
        ],
        "layout": base_layout(
            f"q{q.id} {label(about(ts, q.metric, 'histogram'))}: histogram per frame",
            300,
            hovermode="closest",
        ),
    }
    heat["layout"]["xaxis"]["title"] = {"text": "frame start (s)"}
    heat["layout"]["yaxis"]["title"] = {"text": bins.title}
    return heat


def has_box(ts: TargetSeries) -> bool:
    return all(s in ts.stats for s in BOX_STATS)


def box(q: QuerySeries) -> Figure | None:
    """Box-whisker per frame (Lancaster & Chamberlain, Crossing Timezones in the TimeTrial
    Performance Monitor, 2010, Fig. 2): whiskers min and max, box the quartiles."""
    targets = [ts for ts in q.targets if has_box(ts)]
    if not targets:
        return None
    vals = [v for ts in targets for s in BOX_STATS for v in ts.stats[s]]
    scale, unit = ns_scale(vals) if q.unit == "ns" else (1.0, unit_label(q.unit))
    data = []
    for i, ts in enumerate(targets):
        keep = [
            k for k in range(len(ts.frames)) if all(ts.stats[s][k] is not None for s in BOX_STATS)
        ]
        if not keep:
            continue

        def col(stat: str, keep: list[int] = keep, ts: TargetSeries = ts) -> list[float | None]:
            return scaled([ts.stats[stat][k] for k in keep], scale)

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
                "marker": {"color": colour(i)},
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
    layout["yaxis"]["title"] = {"text": f"{unit_label(q.unit)} ({unit})"}
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
                    "name": f"{label(about(ts, q.metric, 'uncertainty_ns'))} uncertainty (us)",
                    "x": frame_times(ts),
                    "y": scaled(unc, 1e3),
                }
            )
        if vio and any(v for v in vio):
            data.append(
                {
                    "type": "bar",
                    "name": f"{label(about(ts, q.metric, 'violations'))} violations",
                    "x": frame_times(ts),
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
