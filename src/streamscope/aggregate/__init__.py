"""On-line reduction into per-frame statistics: frozen specs and time intervals flow in;
accumulators reduce numpy batches and frozen points (per frame) flow out.
"""

from __future__ import annotations

from streamscope.aggregate.accumulators import Accumulator
from streamscope.aggregate.frames import frame_bounds, frame_index, split_at_frames
from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
    point_from_dict,
)
from streamscope.aggregate.specs import (
    AggregationSpec,
    Count,
    Duty,
    Histogram,
    Max,
    Mean,
    Min,
    Quantiles,
    Sum,
)

__all__ = [
    "Accumulator",
    "AggregationSpec",
    "Count",
    "DropCount",
    "Duty",
    "DutyPoint",
    "FrameResult",
    "Histogram",
    "HistogramPoint",
    "Max",
    "Mean",
    "Min",
    "Point",
    "Quantiles",
    "QuantilesPoint",
    "ScalarPoint",
    "Sum",
    "frame_bounds",
    "frame_index",
    "point_from_dict",
    "split_at_frames",
]
