"""The pipeline drawn as inline SVG, with its performance on it (Curreri, Koehler, George,
Holland & Garcia, Performance Analysis Framework for High-Level Language Applications in
Reconfigurable Computing, 2010, Fig. 2).

Stages are boxes placed by a layered-graph layout (``layout``), left to right; channels are
arrows. Each stage carries its state breakdown as a stacked bar (``stage``), each channel with
figures its mean occupancy against its capacity and its throughput on its edge (``channel``).
Link channels are dashed and carry their virtual queue's verdict; the bottleneck's stages are
outlined. ``pipeline_svg`` (``svg``) draws the whole, scaled to the width it is given; sizes
and colours are in ``style``. Every name is escaped.
"""

from __future__ import annotations

from streamscope.report.graph.channel import ChannelLike
from streamscope.report.graph.layout import Layout, layout
from streamscope.report.graph.stage import StageLike
from streamscope.report.graph.style import CATEGORIES, STATES
from streamscope.report.graph.svg import pipeline_svg

__all__ = ["CATEGORIES", "STATES", "ChannelLike", "Layout", "StageLike", "layout", "pipeline_svg"]
