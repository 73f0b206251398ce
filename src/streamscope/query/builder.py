"""Queries from Python: one function per metric returns a :class:`Query` to chain on.

``occupancy("source -> server").mean().histogram(bins=(0, 64)).every("1s")``
"""

from __future__ import annotations

from streamscope.query.ast import Edge, Query, StageRef
from streamscope.query.parser import parse_query

__all__ = [
    "count",
    "interdeparture",
    "interinsertion",
    "latency",
    "occupancy",
    "state",
    "throughput",
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
