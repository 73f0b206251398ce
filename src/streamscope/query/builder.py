"""Queries from Python: one function per metric returns a :class:`Query` to chain on.

``occupancy("source -> server").mean().histogram(bins=(0, 64)).every("1s")``
"""

from __future__ import annotations

from streamscope.query.ast import Edge, Query, StageRef
from streamscope.query.parser import parse_query

__all__ = [
    "count",
    "counter",
    "input_wait",
    "interdeparture",
    "interinsertion",
    "iteration",
    "latency",
    "occupancy",
    "output_wait",
    "sample",
    "state",
    "throughput",
    "timer",
]

EdgeLike = str | Edge | tuple[str, str]


def _edge_query(metric: str, target: EdgeLike) -> Query:
    if isinstance(target, Edge):
        return Query(metric, target)
    if isinstance(target, tuple):
        src, dst = target
        return Query(metric, Edge(src, dst))
    # Reading the text with the query grammar gives the same errors (and quoting) as a query file.
    return Query(metric, parse_query(f"{metric}({target})", source="target").target)


def occupancy(channel: EdgeLike) -> Query:
    """Time-weighted items in ``channel`` (``"src -> dst"``, an :class:`Edge` or ``(src, dst)``)."""
    return _edge_query("occupancy", channel)


def throughput(channel: EdgeLike) -> Query:
    """Items per second removed at the head of ``channel``."""
    return _edge_query("throughput", channel)


def count(channel: EdgeLike) -> Query:
    """Items inserted into ``channel`` per frame."""
    return _edge_query("count", channel)


def interinsertion(channel: EdgeLike) -> Query:
    """Nanoseconds between successive insertions into ``channel``."""
    return _edge_query("interinsertion", channel)


def interdeparture(channel: EdgeLike) -> Query:
    """Nanoseconds between successive removals from ``channel``."""
    return _edge_query("interdeparture", channel)


def latency(channel: EdgeLike) -> Query:
    """Nanoseconds each item spent in ``channel``."""
    return _edge_query("latency", channel)


def state(stage: str | StageRef) -> Query:
    """Duty cycle of ``stage`` over idle, busy, blocked_in and blocked_out.

    ``stage`` is a name or pattern taken as is (no quoting needed), or a :class:`StageRef`.
    """
    return Query("state", stage if isinstance(stage, StageRef) else StageRef(stage))


def _stage_query(metric: str, target: str | StageRef) -> Query:
    return Query(metric, target if isinstance(target, StageRef) else StageRef(target))


def iteration(stage: str | StageRef) -> Query:
    """Nanoseconds of each loop iteration of ``stage`` (input taken to outputs emitted)."""
    return _stage_query("iteration", stage)


def input_wait(stage: str | StageRef) -> Query:
    """Nanoseconds each loop iteration of ``stage`` waited for its input."""
    return _stage_query("input_wait", stage)


def output_wait(stage: str | StageRef) -> Query:
    """Nanoseconds each loop iteration of ``stage`` spent in its output calls."""
    return _stage_query("output_wait", stage)


def sample(probe: str | StageRef) -> Query:
    """Values captured by the sampler probe ``STAGE.NAME`` (see ``Pipeline.probe``)."""
    return _stage_query("sample", probe)


def counter(probe: str | StageRef) -> Query:
    """Events counted by the counter probe ``STAGE.NAME``, per frame."""
    return _stage_query("counter", probe)


def timer(probe: str | StageRef) -> Query:
    """Nanoseconds of each interval of the timer probe ``STAGE.NAME``."""
    return _stage_query("timer", probe)
