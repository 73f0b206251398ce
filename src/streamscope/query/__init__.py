"""The query language: text or builder calls in, checked :class:`Query` values and a compiled
:class:`Plan` (taps to activate, aggregation specs per target) out. Names are imported when
first used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports
from streamscope.query.metrics import METRIC_NAMES

__all__ = [
    "METRICS",
    "Agg",
    "CompiledQuery",
    "Edge",
    "HistogramAgg",
    "MetricInfo",
    "Origin",
    "PercentileAgg",
    "Plan",
    "QuantilesAgg",
    "Query",
    "StageRef",
    "StatAgg",
    "Target",
    "TargetPlan",
    "as_query",
    "compile_queries",
    "format_duration",
    "parse_duration",
    "parse_queries",
    "parse_query",
]
#: ... and one builder function per metric (``query.builder``), named after it.
__all__.extend(METRIC_NAMES)

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        "Agg": "streamscope.query.ast:Agg",
        "CompiledQuery": "streamscope.query.plan:CompiledQuery",
        "Edge": "streamscope.query.ast:Edge",
        "HistogramAgg": "streamscope.query.ast:HistogramAgg",
        "METRICS": "streamscope.query.metrics:METRICS",
        "MetricInfo": "streamscope.query.metrics:MetricInfo",
        "Origin": "streamscope.query.ast:Origin",
        "PercentileAgg": "streamscope.query.ast:PercentileAgg",
        "Plan": "streamscope.query.plan:Plan",
        "QuantilesAgg": "streamscope.query.ast:QuantilesAgg",
        "Query": "streamscope.query.ast:Query",
        "StageRef": "streamscope.query.ast:StageRef",
        "StatAgg": "streamscope.query.ast:StatAgg",
        "Target": "streamscope.query.ast:Target",
        "TargetPlan": "streamscope.query.plan:TargetPlan",
        "as_query": "streamscope.query.parser:as_query",
        "compile_queries": "streamscope.query.compile:compile_queries",
        **{name: f"streamscope.query.builder:{name}" for name in METRIC_NAMES},
        "format_duration": "streamscope.query.units:format_duration",
        "parse_duration": "streamscope.query.units:parse_duration",
        "parse_queries": "streamscope.query.parser:parse_queries",
        "parse_query": "streamscope.query.parser:parse_query",
    },
)

if TYPE_CHECKING:
    from streamscope.query.ast import Agg as Agg
    from streamscope.query.ast import Edge as Edge
    from streamscope.query.ast import HistogramAgg as HistogramAgg
    from streamscope.query.ast import Origin as Origin
    from streamscope.query.ast import PercentileAgg as PercentileAgg
    from streamscope.query.ast import QuantilesAgg as QuantilesAgg
    from streamscope.query.ast import Query as Query
    from streamscope.query.ast import StageRef as StageRef
    from streamscope.query.ast import StatAgg as StatAgg
    from streamscope.query.ast import Target as Target
    from streamscope.query.builder import *  # noqa: F403 - every metric's builder function
    from streamscope.query.compile import compile_queries as compile_queries
    from streamscope.query.metrics import METRICS as METRICS
    from streamscope.query.metrics import MetricInfo as MetricInfo
    from streamscope.query.parser import as_query as as_query
    from streamscope.query.parser import parse_queries as parse_queries
    from streamscope.query.parser import parse_query as parse_query
    from streamscope.query.plan import CompiledQuery as CompiledQuery
    from streamscope.query.plan import Plan as Plan
    from streamscope.query.plan import TargetPlan as TargetPlan
    from streamscope.query.units import format_duration as format_duration
    from streamscope.query.units import parse_duration as parse_duration
