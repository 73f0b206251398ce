"""The query language: text or builder calls in, checked :class:`Query` values and a compiled
:class:`Plan` (taps to activate, aggregation specs per target) out. Names are imported when
first used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

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
        "count": "streamscope.query.builder:count",
        "counter": "streamscope.query.builder:counter",
        "format_duration": "streamscope.query.units:format_duration",
        "input_wait": "streamscope.query.builder:input_wait",
        "interdeparture": "streamscope.query.builder:interdeparture",
        "interinsertion": "streamscope.query.builder:interinsertion",
        "iteration": "streamscope.query.builder:iteration",
        "latency": "streamscope.query.builder:latency",
        "occupancy": "streamscope.query.builder:occupancy",
        "output_wait": "streamscope.query.builder:output_wait",
        "parse_duration": "streamscope.query.units:parse_duration",
        "parse_queries": "streamscope.query.parser:parse_queries",
        "parse_query": "streamscope.query.parser:parse_query",
        "sample": "streamscope.query.builder:sample",
        "state": "streamscope.query.builder:state",
        "throughput": "streamscope.query.builder:throughput",
        "timer": "streamscope.query.builder:timer",
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
    from streamscope.query.builder import count as count
    from streamscope.query.builder import counter as counter
    from streamscope.query.builder import input_wait as input_wait
    from streamscope.query.builder import interdeparture as interdeparture
    from streamscope.query.builder import interinsertion as interinsertion
    from streamscope.query.builder import iteration as iteration
    from streamscope.query.builder import latency as latency
    from streamscope.query.builder import occupancy as occupancy
    from streamscope.query.builder import output_wait as output_wait
    from streamscope.query.builder import sample as sample
    from streamscope.query.builder import state as state
    from streamscope.query.builder import throughput as throughput
    from streamscope.query.builder import timer as timer
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
