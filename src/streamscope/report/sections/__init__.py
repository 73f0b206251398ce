"""The sections of the report page, one module each, each an object of one shape
(``base.ReportSection``: ``id``, ``title``, ``render(ctx)``); ``DEFAULT_SECTIONS`` is the page's
order."""

from __future__ import annotations

from streamscope.report.sections.base import Context, ReportSection
from streamscope.report.sections.clocks import ClocksSection
from streamscope.report.sections.comparison import ComparisonSection
from streamscope.report.sections.findings import FindingsSection
from streamscope.report.sections.monitoring import DropsSection, OverheadSection
from streamscope.report.sections.pipeline import PipelineSection
from streamscope.report.sections.profiles import ProfilesSection
from streamscope.report.sections.queries import HISTOGRAMS, LATENCY, QUERIES
from streamscope.report.sections.stacks import StacksSection
from streamscope.report.sections.virtual_queues import VirtualQueuesSection
from streamscope.report.sections.whatif import WhatIfSection

#: The page's sections in order; a section with nothing for a run (no traced functions, no
#: other run to compare with) renders "" and is left off.
DEFAULT_SECTIONS: tuple[ReportSection, ...] = (
    FindingsSection(),
    WhatIfSection(),
    StacksSection(),
    PipelineSection(),
    QUERIES,
    HISTOGRAMS,
    LATENCY,
    VirtualQueuesSection(),
    ClocksSection(),
    DropsSection(),
    OverheadSection(),
    ProfilesSection(),
    ComparisonSection(),
)

__all__ = ["DEFAULT_SECTIONS", "Context", "ReportSection"]
