"""On-line reduction into per-frame statistics: frozen specs and time intervals flow in;
accumulators reduce numpy batches and frozen points (per frame) flow out.

The names below are imported when first used (PEP 562): the points and specs (plain data) are
imported without the accumulators' numpy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

if TYPE_CHECKING:
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

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Accumulator": "streamscope.aggregate.accumulators:Accumulator",
        "frame_bounds": "streamscope.aggregate.frames:frame_bounds",
        "frame_index": "streamscope.aggregate.frames:frame_index",
        "split_at_frames": "streamscope.aggregate.frames:split_at_frames",
        "DropCount": "streamscope.aggregate.points:DropCount",
        "DutyPoint": "streamscope.aggregate.points:DutyPoint",
        "FrameResult": "streamscope.aggregate.points:FrameResult",
        "HistogramPoint": "streamscope.aggregate.points:HistogramPoint",
        "Point": "streamscope.aggregate.points:Point",
        "QuantilesPoint": "streamscope.aggregate.points:QuantilesPoint",
        "ScalarPoint": "streamscope.aggregate.points:ScalarPoint",
        "point_from_dict": "streamscope.aggregate.points:point_from_dict",
        "AggregationSpec": "streamscope.aggregate.specs:AggregationSpec",
        "Count": "streamscope.aggregate.specs:Count",
        "Duty": "streamscope.aggregate.specs:Duty",
        "Histogram": "streamscope.aggregate.specs:Histogram",
        "Max": "streamscope.aggregate.specs:Max",
        "Mean": "streamscope.aggregate.specs:Mean",
        "Min": "streamscope.aggregate.specs:Min",
        "Quantiles": "streamscope.aggregate.specs:Quantiles",
        "Sum": "streamscope.aggregate.specs:Sum",
    },
)
