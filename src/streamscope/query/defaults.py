"""The queries a run gets when it asks none: every channel and every stage, the metrics' own
default aggregations, the run's frame.

In: a topology. Out: query texts (``occupancy``, ``throughput`` and ``latency`` of every channel,
``state`` duty of every stage), for ``streamscope run`` without ``--query``/``--queries``/
``QUERIES`` and ``ss.run`` with no queries. An explicit list replaces them whole.
"""

from __future__ import annotations

from streamscope.core.topology import Topology

#: Per channel (wildcards: every channel of the pipeline) and per stage.
CHANNEL_DEFAULTS = ("occupancy(* -> *)", "throughput(* -> *)", "latency(* -> *)")
STAGE_DEFAULTS = ("state(*)",)
#: ... and, for a program run as it is, every asyncio event loop's lag (``pipeline/program/auto/tasks.py``).
PROGRAM_DEFAULTS = ("timer(loop*.lag): mean, max",)


def default_queries(topology: Topology) -> list[str]:
    """The default query texts for ``topology`` (none for what it does not have)."""
    out: list[str] = []
    if topology.channels:
        out.extend(CHANNEL_DEFAULTS)
    if topology.stages:
        out.extend(STAGE_DEFAULTS)
    if any(p.name.endswith(".loop_lag") for p in topology.user_probes):
        out.append("timer(*.loop_lag): mean, max")  # asyncio loops' lag
    return out
