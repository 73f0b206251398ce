"""Reading a recorded run: per-stage and per-channel breakdowns, findings, and run comparison.

``stage_breakdown(run)`` and ``channel_summary(run)`` summarise the whole run per stage and
channel; ``findings(run)`` reads them (bottleneck, Little's law, drops, clock violations, rejected
queue models); ``compare(run_a, run_b)`` sets two runs side by side with a verdict per figure.
All take ``Run`` objects (``streamscope.load(path)``) and read only what the run recorded.
"""

from __future__ import annotations

from streamscope.analysis.breakdown import (
    ChannelSummary,
    StageBreakdown,
    channel_summary,
    stage_breakdown,
)
from streamscope.analysis.compare import Comparison, Delta, compare
from streamscope.analysis.findings import Finding, findings

__all__ = [
    "ChannelSummary",
    "Comparison",
    "Delta",
    "Finding",
    "StageBreakdown",
    "channel_summary",
    "compare",
    "findings",
    "stage_breakdown",
]
