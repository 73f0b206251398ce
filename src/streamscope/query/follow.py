"""What a run learns as it goes: the targets that stages, channels and value probes appearing
during the run add to a plan's queries (``new_targets``, in the monitor and the live page),
and what a program's processes must record for them (``watches``).
"""

from __future__ import annotations

from collections.abc import Sequence
from fnmatch import fnmatchcase
from typing import Any

from streamscope.aggregate.specs import AggregationSpec
from streamscope.core.topology import ChannelInfo
from streamscope.query.aggspecs import query_specs
from streamscope.query.ast import Edge, Path, Query
from streamscope.query.defaults import read_default
from streamscope.query.metrics import METRICS
from streamscope.query.plan import Plan, TargetPlan

__all__ = ["new_targets", "watches"]


def _parsed(text: str, source: str) -> Query:
    """A plan's query read again from its text where it lost its place in it (Lark loaded
    only then: the monitor follows targets with parsed queries, and never loads it)."""
    known = read_default(text, source)
    if known is not None:
        return known
    from streamscope.query.parser import parse_query

    return parse_query(text, source=source)


def new_targets(
    plan: Plan,
    stages: Sequence[str] = (),
    channels: Sequence[ChannelInfo] = (),
    probes: Sequence[tuple[str, str]] = (),
    *,
    fresh: bool = False,
) -> list[tuple[int, TargetPlan]]:
    """What stages, channels or value probes (``(kind, "STAGE.NAME")``) that appeared during
    the run add to ``plan``'s queries: (query id, target) for each query whose pattern matches
    one it does not have yet. ``fresh``: none of them was known before (none is a target
    already: the queries' targets need not be looked through)."""
    out: list[tuple[int, TargetPlan]] = []
    # A channel's specs depend on its query and its capacity only: made once per pair.
    specs_for: dict[tuple[int, int], tuple[AggregationSpec, ...]] = {}
    for cq in plan.queries:
        have = set() if fresh else {t.name for t in cq.targets}
        target = cq.query.target
        if isinstance(target, Path):
            continue  # a path's stages and channels were all known when it was compiled
        origin = cq.query.origin or _parsed(cq.text, f"query {cq.id + 1}").origin
        assert origin is not None
        wanted = METRICS[cq.metric].probe
        if wanted and not isinstance(target, Edge):
            for kind, name in probes:
                if kind != wanted or name in have or not fnmatchcase(name, target.name):
                    continue
                out.append((cq.id, TargetPlan(name, query_specs(cq.query, [], origin))))
                have.add(name)
            continue
        if isinstance(target, Edge):
            for c in channels:
                if c.name in have or not (
                    fnmatchcase(c.src, target.src) and fnmatchcase(c.dst, target.dst)
                ):
                    continue
                key = (cq.id, c.capacity)
                made = specs_for.get(key)
                if made is None:
                    made = specs_for[key] = query_specs(cq.query, [c], origin)
                out.append((cq.id, TargetPlan(c.name, made)))
                have.add(c.name)
        elif not METRICS[cq.metric].probe:
            specs = cq.targets[0].specs if cq.targets else None
            for name in stages:
                if name in have or not fnmatchcase(name, target.name):
                    continue
                if specs is None:
                    specs = query_specs(cq.query, [], origin)
                out.append((cq.id, TargetPlan(name, specs)))
                have.add(name)
    return out


def watches(plan: Plan) -> list[dict[str, Any]]:
    """What stages and channels that appear during the run need recorded, as plain data (a
    process the program starts later reads it from its environment): per query, the probe
    kinds its metric needs and its target's name patterns (``stage``, ``src`` and ``dst``, or
    ``probe``: a value probe's ``STAGE.NAME``)."""
    out: list[dict[str, Any]] = []
    for cq in plan.queries:
        target = cq.query.target
        kinds = list(METRICS[cq.metric].taps)
        if isinstance(target, Path):
            # A program's path (its mean from Little's law): every queue's ends and every
            # stage's states, as the stages and queues on it are not known before they appear.
            if not any(t.littles for t in cq.targets):
                continue
            out.append({"kinds": ["tail", "head"], "src": "*", "dst": "*"})
            out.append({"kinds": ["state"], "stage": "*"})
            continue
        if isinstance(target, Edge):
            out.append({"kinds": kinds, "src": target.src, "dst": target.dst})
        elif not METRICS[cq.metric].probe:
            out.append({"kinds": kinds, "stage": target.name})
        else:  # a value probe the program's instrumentation may make (an event loop's lag)
            out.append({"kinds": [METRICS[cq.metric].probe], "probe": target.name})
    return out
