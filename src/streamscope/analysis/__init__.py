"""Reading a recorded run: per-stage and per-channel breakdowns, findings, and run comparison.

``stage_breakdown(run)`` and ``channel_summary(run)`` summarise the whole run per stage and
channel; ``findings(run)`` reads them with a list of passes (bottleneck, Little's law, drops,
clock violations, rejected queue models: ``findings.py`` says how to add one);
``compare(run_a, run_b)`` sets two runs side by side with a verdict per figure.
All take ``Run`` objects (``streamscope.load(path)``) and read only what the run recorded.
"""

from __future__ import annotations

from streamscope.analysis.breakdown import (
    ChannelSummary,
    StageBreakdown,
    channel_summary,
    stage_breakdown,
)
from streamscope.analysis.compare import Comparison, compare
from streamscope.analysis.context import Context, Finding
from streamscope.analysis.delta import Delta
from streamscope.analysis.findings import DEFAULT_PASSES, FindingsPass, findings
from streamscope.analysis.speed import Speed

__all__ = [
    "DEFAULT_PASSES",
    "ChannelSummary",
    "Comparison",
    "Context",
    "Delta",
    "Finding",
    "FindingsPass",
    "Speed",
    "StageBreakdown",
    "channel_summary",
    "compare",
    "findings",
    "stage_breakdown",
]
