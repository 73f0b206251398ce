"""The queries a run gets when it asks none: every channel and every stage, the metrics' own
default aggregations, the run's frame.

In: a topology. Out: query texts (``occupancy``, ``throughput`` and ``latency`` of every channel,
``state`` duty of every stage), for ``streamscope run`` without ``--query``/``--queries``/
``QUERIES`` and ``ss.run`` with no queries. An explicit list replaces them whole.
"""

from __future__ import annotations

from dataclasses import replace

from streamscope.core.topology import Topology
from streamscope.query.ast import Edge, Origin, Query, StageRef, StatAgg

#: Per channel (wildcards: every channel of the pipeline) and per stage.
CHANNEL_DEFAULTS = ("occupancy(* -> *)", "throughput(* -> *)", "latency(* -> *)")
STAGE_DEFAULTS = ("state(*)",)
#: ... and, for a program run as it is, every asyncio event loop's lag (``pipeline/program/auto/tasks.py``).
PROGRAM_DEFAULTS = ("timer(loop*.lag): mean, max",)
#: ... and a run's every event loop's lag, where its probes are declared.
LOOP_LAG = "timer(*.loop_lag): mean, max"


def default_queries(topology: Topology) -> list[str]:
    """The default query texts for ``topology`` (none for what it does not have)."""
    out: list[str] = []
    if topology.channels:
        out.extend(CHANNEL_DEFAULTS)
    if topology.stages:
        out.extend(STAGE_DEFAULTS)
    if any(p.name.endswith(".loop_lag") for p in topology.user_probes):
        out.append(LOOP_LAG)  # asyncio loops' lag
    return out


def _read(text: str) -> tuple[Query, tuple[int, ...]]:
    """One default's query and the columns of its names, as the parser reads them."""
    metric, rest = text.split("(", 1)
    target_text, aggs = rest.split(")", 1)
    aggregations = tuple(StatAgg(a.strip()) for a in aggs.lstrip(":").split(",") if a.strip())
    if " -> " in target_text:
        src, dst = target_text.split(" -> ")
        at = len(metric) + 2
        return Query(metric, Edge(src, dst), aggregations), (at, at + len(src) + 4)
    return Query(metric, StageRef(target_text), aggregations), (len(metric) + 2,)


#: The defaults as the parser reads them (``tests/unit/test_query_defaults.py`` holds each to
#: it): a run that asks nothing loads no parser (Lark and its tables: some 25 ms of its start).
_READ = {t: _read(t) for t in (*CHANNEL_DEFAULTS, *STAGE_DEFAULTS, *PROGRAM_DEFAULTS, LOOP_LAG)}


def read_default(text: str, source: str) -> Query | None:
    """``parse_query(text, source=source)`` for a default query's text; None for any other."""
    read = _READ.get(text)
    if read is None:
        return None
    query, columns = read
    return replace(query, origin=Origin(text, source, 1, query.target, columns))
