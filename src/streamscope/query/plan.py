"""A compiled query plan: what every query measures, where, and how it reduces.

In: nothing (``compile.compile_queries`` builds it). Out: frozen ``Plan``, ``CompiledQuery`` and
``TargetPlan`` values, with the one rule of which (query, target) pairs are estimated (a link
channel's occupancy: a virtual queue) and which are measured.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, fields
from typing import Any

from streamscope.aggregate.specs import AggregationSpec
from streamscope.core.topology import Topology
from streamscope.query.ast import Query
from streamscope.query.metrics import METRICS

__all__ = ["CompiledQuery", "Plan", "TargetPlan"]


def spec_dict(spec: AggregationSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"stat": spec.stat}
    for f in fields(spec):
        value = getattr(spec, f.name)
        out[f.name] = list(value) if isinstance(value, tuple) else value
    return out


@dataclass(frozen=True, slots=True)
class TargetPlan:
    """One matched channel (by its name ``"src -> dst"``) or stage, and the specs to run on it."""

    name: str
    specs: tuple[AggregationSpec, ...]

    @property
    def stats(self) -> tuple[str, ...]:
        return tuple(s.stat for s in self.specs)


@dataclass(frozen=True, slots=True)
class CompiledQuery:
    """A checked query: ``id`` is its 0-based position, ``text`` its canonical text, ``unit`` the
    unit of its values (``items``, ``items/s``, ``ns`` or ``state``), ``frame_ns`` its frame."""

    id: int
    query: Query
    text: str
    metric: str
    unit: str
    frame_ns: int
    targets: tuple[TargetPlan, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "text": self.text,
            "metric": self.metric,
            "unit": self.unit,
            "frame_ns": self.frame_ns,
            "targets": [
                {
                    "name": t.name,
                    "stats": list(t.stats),
                    "specs": [spec_dict(s) for s in t.specs],
                }
                for t in self.targets
            ],
        }


@dataclass(frozen=True, slots=True)
class Plan:
    """Every compiled query, and the probes they need: ``("tail" | "head", channel name)``,
    ``("state" | "iteration" | "input_wait" | "output_wait", stage name)`` and
    ``("sampler" | "counter" | "timer", "STAGE.NAME")``."""

    queries: tuple[CompiledQuery, ...]
    taps: frozenset[tuple[str, str]]
    #: Stages and channels may appear while the run goes on (``compile_queries``).
    open_world: bool = False

    def estimated(self, topology: Topology) -> Iterator[tuple[CompiledQuery, TargetPlan]]:
        """The (query, target) pairs measured by estimation, not by counting: the occupancy of
        a link channel, whose middle (the bus between its two buffers) cannot be seen — a
        virtual queue. The one place that says so."""
        links = topology.link_names
        for q in self.queries:
            if q.metric == "occupancy":
                yield from ((q, t) for t in q.targets if t.name in links)

    def measured(self, topology: Topology) -> Iterator[tuple[CompiledQuery, TargetPlan]]:
        """Every other (query, target) pair: measured directly from records."""
        virtual = {(q.id, t.name) for q, t in self.estimated(topology)}
        for q in self.queries:
            yield from ((q, t) for t in q.targets if (q.id, t.name) not in virtual)

    def host_reduced(
        self, topology: Topology, trace: bool
    ) -> dict[str, tuple[tuple[CompiledQuery, TargetPlan], ...]]:
        """The measured (query, target) pairs that a cluster host's agent reduces to frames
        itself (by host), so that their records stay there: every pair whose taps all lie on
        one host — a channel between two of its stages, one end of a channel to or from
        another host (a link's count or throughput), a value probe of one of its stages —
        unless every record is kept (``trace``) — and the latency of a link into a host, on
        that host: each item carries the time its producer's tap put it in (the producer's
        clock), the consumer's host pairs it with its removal. Not states
        (``summarized_states``). The one place that says so."""
        if trace:
            return {}
        kind = {r.name: r.kind for r in topology.resources}
        where = {s.name: s.resource for s in topology.stages}
        ends = {c.name: (c.src, c.dst) for c in topology.channels}
        links = topology.link_names
        out: dict[str, list[tuple[CompiledQuery, TargetPlan]]] = {}
        for q, t in self.measured(topology):
            if q.metric == "state":
                continue
            info = METRICS[q.metric]
            if info.on_edge:
                src, dst = ends.get(t.name, ("", ""))
                stages = {src if tap == "tail" else dst for tap in info.taps}
                if q.metric == "latency" and t.name in links:
                    stages = {dst}  # the items bring their insertion times
            else:
                stages = {t.name.split(".", 1)[0] if info.probe else t.name}
            hosts = {where.get(s, "") for s in stages}
            if len(hosts) == 1:
                (host,) = hosts
                if kind.get(host) == "host":
                    out.setdefault(host, []).append((q, t))
        return {h: tuple(pairs) for h, pairs in out.items()}

    def monitor_measured(
        self, topology: Topology, trace: bool
    ) -> list[tuple[CompiledQuery, TargetPlan]]:
        """The measured pairs the monitor reduces from records: all but ``host_reduced``."""
        there = {(q.id, t.name) for pairs in self.host_reduced(topology, trace).values()
                 for q, t in pairs}  # fmt: skip
        return [(q, t) for q, t in self.measured(topology) if (q.id, t.name) not in there]

    def summarized_states(self, topology: Topology, trace: bool) -> dict[str, int]:
        """Stages on cluster hosts whose states their host's agent reduces to frames itself
        (stage -> the frame it reduces them on: the greatest common divisor of its state
        queries' frames, whose every frame is made of whole frames of it), so that their
        records stay there: every such stage, unless every record is kept (``trace``). The one
        place that says so."""
        if trace:
            return {}
        kind = {r.name: r.kind for r in topology.resources}
        on_host = {s.name for s in topology.stages if kind.get(s.resource) == "host"}
        frames: dict[str, set[int]] = {}
        for q in self.queries:
            if q.metric == "state":
                for t in q.targets:
                    if t.name in on_host:
                        frames.setdefault(t.name, set()).add(q.frame_ns)
        return {stage: math.gcd(*f) for stage, f in frames.items()}

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": [q.to_dict() for q in self.queries],
            "taps": sorted([kind, name] for kind, name in self.taps),
        }
