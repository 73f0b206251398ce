"""The figure of a comparison of two runs: every compared number's relative change.

In: the rows of ``analysis.compare`` (as dicts). Out: a plotly figure specification.
"""

from __future__ import annotations

from typing import Any

from streamscope.report.figures.spec import Figure, base_layout, label, r6


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
