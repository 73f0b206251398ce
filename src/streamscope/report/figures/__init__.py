"""Plotly figure specifications (plain ``{"data": [...], "layout": {...}}`` dicts) for a report,
by family: a query's (``queries``), a virtual queue's (``virtual``), a clock domain's
(``clocks``) and a comparison's (``comparison``); what they share is in ``spec``.

Built as dicts rather than ``plotly.graph_objects`` so a report of hundreds of figures stays fast;
``plotly.graph_objects.Figure(spec)`` accepts each one (the tests check that). Text that came
from the user (targets, stage names) is escaped for plotly's pseudo-HTML labels with
``label()``; numbers are rounded to 6 significant digits to keep the page small.
"""

from __future__ import annotations

from streamscope.report.figures.clocks import clock_exchanges, clock_fits
from streamscope.report.figures.comparison import compare_bars
from streamscope.report.figures.queries import (
    box,
    clock_stats,
    duty,
    has_box,
    histograms,
    partial_notes,
    timeseries,
)
from streamscope.report.figures.spec import Figure, base_layout, label, ns_scale, r6, rs
from streamscope.report.figures.virtual import vq_levels, vq_means, vq_selfcheck

__all__ = [
    "Figure",
    "base_layout",
    "box",
    "clock_exchanges",
    "clock_fits",
    "clock_stats",
    "compare_bars",
    "duty",
    "has_box",
    "histograms",
    "label",
    "ns_scale",
    "partial_notes",
    "r6",
    "rs",
    "timeseries",
    "vq_levels",
    "vq_means",
    "vq_selfcheck",
]
