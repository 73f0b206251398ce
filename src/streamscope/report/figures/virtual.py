"""The figures of a virtual queue: its self-check per frame, its mean occupancy per frame, and
its sub-queues' level distributions, predicted against measured.

In: a virtual queue's per-frame details (``Run.virtual_queues``) or its ``Levels``. Out: plotly
figure specifications.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from streamscope.report.data import Levels
from streamscope.report.figures.spec import Figure, base_layout, label, rs

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
#: A level figure's menu offers at most about this many single frames (evenly spread).
MAX_FRAME_BUTTONS = 120


def _scatter(
    mode: str, name: str, x: list[Any], y: Sequence[float | None], **style: Any
) -> dict[str, Any]:
    """One scatter trace (``style``: its ``line`` or ``marker``)."""
    return {"type": "scatter", "mode": mode, "name": name, "x": x, "y": rs(y), **style}


def vq_selfcheck(target: str, frames: list[dict[str, Any]]) -> Figure:
    """A virtual queue's self-check per frame: W1 against the threshold above which the
    buffers tell the model from the link, and the tolerance (plus clock bias) above which
    that matters."""
    x = [f["frame"] for f in frames]
    rej = [f for f in frames if f.get("verdict") == "rejected"]
    data = [
        _scatter("lines+markers", "W1 measured vs predicted buffers", x,
                 [f.get("w1_items") for f in frames], line={"color": "#2563eb"}),
        _scatter("lines", "chance + clock bias (told apart above)", x,
                 [f.get("threshold_items") for f in frames],
                 line={"color": "#f59e0b", "dash": "dash", "shape": "hvh"}),
        _scatter("lines", "tolerance + clock bias (rejected above both)", x,
                 [None if f.get("tolerance_items") is None
                  else f["tolerance_items"] + (f.get("clock_bias_items") or 0.0)
                  for f in frames],
                 line={"color": "#dc2626", "dash": "dash", "shape": "hvh"}),
        _scatter("markers", "rejected frame", [f["frame"] for f in rej],
                 [f.get("w1_items") for f in rej],
                 marker={"color": "#dc2626", "size": 10, "symbol": "x"}),
    ]  # fmt: skip
    truth = [f.get("w1_truth_items") for f in frames]
    if any(v is not None for v in truth):
        data.append(
            _scatter("lines+markers", "W1 predicted vs truth", x, truth,
                     line={"color": "#059669", "dash": "dot"})
        )  # fmt: skip
        data.append(
            _scatter("lines+markers", "W1 ideal queue vs truth", x,
                     [f.get("w1_truth_ideal_items") for f in frames],
                     line={"color": "#9ca3af", "dash": "dot"})
        )  # fmt: skip
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
        _scatter("lines+markers", name, x, [f.get(key) for f in frames],
                 line={"color": colour, "dash": dash})
        for key, name, colour, dash in series
        if any(f.get(key) is not None for f in frames)
    ]  # fmt: skip
    layout = base_layout(f"{label(target)}: mean occupancy per frame", 300)
    layout["xaxis"]["title"] = {"text": "frame"}
    layout["yaxis"]["title"] = {"text": "items"}
    return {"data": data, "layout": layout}


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
        layout[f"xaxis{ax}"], layout[f"yaxis{ax}"] = _panel_axes(ax, lo, hi, first=p == 0)
        annotations.append(_panel_title(title, lo, hi))
        for key, name, colour, dash in series:
            if key not in levels.overall:
                continue
            keys.append(key)
            data.append(_level_line(f"{title}: {name}", levels.overall[key], ax, colour, dash))
    layout["annotations"] = annotations
    layout["margin"] = {"l": 64, "r": 24, "t": 90, "b": 110}
    if len(levels.frames) > 1:
        layout["updatemenus"] = [
            {"buttons": _frame_buttons(levels, keys), "direction": "down", "x": 1.0,
             "xanchor": "right", "y": 1.2}
        ]  # fmt: skip
    return {"data": data, "layout": layout}


def _panel_axes(
    ax: str, lo: float, hi: float, *, first: bool
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A panel's x axis (over ``lo``..``hi`` of the width) and y axis (titled on the first)."""
    xaxis = {
        "domain": [lo, hi],
        "anchor": f"y{ax}",
        "title": {"text": "level (items)"},
        "gridcolor": "#e5e7eb",
    }
    yaxis = {
        "anchor": f"x{ax}",
        "gridcolor": "#e5e7eb",
        "tickformat": ".0%",
        **({"title": {"text": "fraction of the time"}} if first else {}),
    }
    return xaxis, yaxis


def _panel_title(title: str, lo: float, hi: float) -> dict[str, Any]:
    return {
        "text": title,
        "xref": "paper",
        "yref": "paper",
        "x": (lo + hi) / 2,
        "y": 1.0,
        "showarrow": False,
        "yanchor": "bottom",
    }


def _level_line(name: str, ys: Sequence[float], ax: str, colour: str, dash: str) -> dict[str, Any]:
    """One level distribution as a step line in the panel of axes ``ax``."""
    return _scatter(
        "lines", name, list(range(len(ys))), ys, xaxis=f"x{ax}", yaxis=f"y{ax}",
        line={"color": colour, "dash": dash, "shape": "hvh", "width": 1.8},
        hovertemplate="level %{x}: %{y:.2%}",
    )  # fmt: skip


def _frame_buttons(levels: Levels, keys: list[str]) -> list[dict[str, Any]]:
    """The menu's buttons: the whole run, then single frames (at most about
    ``MAX_FRAME_BUTTONS`` of them, evenly spread)."""
    frames = levels.frames
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
    return buttons
