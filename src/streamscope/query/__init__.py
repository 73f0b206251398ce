"""The query language: text or builder calls in, checked :class:`Query` values and a compiled
:class:`Plan` (taps to activate, aggregation specs per target) out."""

from __future__ import annotations

from streamscope.query.ast import (
    Agg,
    Edge,
    HistogramAgg,
    Origin,
    PercentileAgg,
    QuantilesAgg,
    Query,
    StageRef,
    StatAgg,
    Target,
)
from streamscope.query.builder import (
    count,
    counter,
    input_wait,
    interdeparture,
    interinsertion,
    iteration,
    latency,
    occupancy,
    output_wait,
    sample,
    state,
    throughput,
    timer,
)
from streamscope.query.compile import CompiledQuery, Plan, TargetPlan, compile_queries
from streamscope.query.metrics import METRICS, MetricInfo
from streamscope.query.parser import as_query, parse_queries, parse_query
from streamscope.query.units import format_duration, parse_duration

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
    "count",
    "counter",
    "format_duration",
    "input_wait",
    "interdeparture",
    "interinsertion",
    "iteration",
    "latency",
    "occupancy",
    "output_wait",
    "parse_duration",
    "parse_queries",
    "parse_query",
    "sample",
    "state",
    "throughput",
    "timer",
]
