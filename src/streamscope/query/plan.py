"""A compiled query plan: what every query measures, where, and how it reduces.

In: nothing (``compile.compile_queries`` builds it). Out: frozen ``Plan``, ``CompiledQuery`` and
``TargetPlan`` values, with the one rule of which (query, target) pairs are estimated (a link
channel's occupancy: a virtual queue) and which are measured.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from streamscope.aggregate.specs import AggregationSpec
from streamscope.core.errors import ConfigError
from streamscope.core.topology import Topology
from streamscope.query.ast import Query
from streamscope.query.metrics import METRICS

__all__ = ["CompiledQuery", "Plan", "Sites", "TargetPlan"]


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
    #: A path (``SRC ~> DST``) whose items cannot be followed (a program's queues, a channel
    #: between processes, an event loop's task): its mean from Little's law over the path.
    littles: bool = False

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


Pair = tuple[CompiledQuery, TargetPlan]
#: A (query, target) pair by name: the query's id and the target's name.
PairKey = tuple[int, str]


@dataclass(frozen=True, slots=True)
class Sites:
    """Where each (query, target) pair of a run is reduced, decided once for its topology and
    options (``Plan.sited``) and read by everyone who needs it: the session that starts the
    agents, the runner that tells each what to reduce, the monitor that reduces the rest.

    ``estimated``: a virtual queue's occupancy, estimated by the monitor's simulation;
    ``monitor``: measured from records by the monitor; ``hosts``: per cluster host, the pairs
    its agent reduces to frames; ``host_states``: stages on hosts whose states their host's
    agent reduces, on the frame it reduces them on; ``raw_links``: link channels whose
    device-side records cross raw (None: every link's); ``trace``: every record is kept."""

    estimated: tuple[PairKey, ...] = ()
    monitor: tuple[PairKey, ...] = ()
    hosts: tuple[tuple[str, tuple[PairKey, ...]], ...] = ()
    host_states: tuple[tuple[str, int], ...] = ()
    raw_links: frozenset[str] | None = frozenset()
    trace: bool = False


@dataclass(frozen=True, slots=True)
class Plan:
    """Every compiled query, and the probes they need: ``("tail" | "head", channel name)``,
    ``("state" | "iteration" | "input_wait" | "output_wait", stage name)`` and
    ``("sampler" | "counter" | "timer", "STAGE.NAME")``. ``sites``: where each pair is
    reduced, once ``sited`` (``None`` before)."""

    queries: tuple[CompiledQuery, ...]
    taps: frozenset[tuple[str, str]]
    #: Stages and channels may appear while the run goes on (``compile_queries``).
    open_world: bool = False
    sites: Sites | None = None

    # -- where each pair is reduced: decided once (``sited``), then read ---------------------

    def sited(self, topology: Topology, *, trace: bool, device_trace: bool = False) -> Plan:
        """This plan with ``sites`` decided for ``topology``: ``trace`` keeps every record
        (nothing is reduced away from the monitor), ``device_trace`` ships devices' link
        records raw too. The one place that decides where each pair is reduced."""
        estimated = [(q.id, t.name) for q, t in self._estimated(topology)]
        hosts = {} if trace else self._host_reduced(topology)
        there = {(q.id, t.name) for pairs in hosts.values() for q, t in pairs}
        monitor = [(q.id, t.name) for q, t in self._measured(topology)
                   if (q.id, t.name) not in there]  # fmt: skip
        links = topology.link_names
        raw: frozenset[str] | None = None
        if not (trace or device_trace):
            raw = frozenset(name for _, name in monitor if name in links)
        sites = Sites(
            estimated=tuple(estimated),
            monitor=tuple(monitor),
            hosts=tuple((h, tuple((q.id, t.name) for q, t in pairs)) for h, pairs in hosts.items()),
            host_states=() if trace else tuple(self._host_states(topology).items()),
            raw_links=raw,
            trace=trace,
        )
        return replace(self, sites=sites)

    def grown(self, added: Iterable[tuple[int, TargetPlan]]) -> Plan:
        """This plan with targets that appeared while the run went on (``new_targets``): an
        open world's (a program's) stages and channels, reduced by the monitor."""
        extra: dict[int, tuple[TargetPlan, ...]] = {}
        for qid, target in added:
            extra[qid] = (*extra.get(qid, ()), target)
        if not extra:
            return self
        queries = tuple(
            replace(q, targets=q.targets + extra[q.id]) if q.id in extra else q
            for q in self.queries
        )
        sites = self.sites
        if sites is not None:
            new = tuple((qid, t.name) for qid, targets in extra.items() for t in targets)
            sites = replace(sites, monitor=sites.monitor + new)
        return replace(self, queries=queries, sites=sites)

    def _placed(self) -> Sites:
        if self.sites is None:
            raise ValueError("the plan's sites are not decided yet (Plan.sited)")
        return self.sites

    def pairs(self, keys: Iterable[PairKey]) -> list[Pair]:
        """The (query, target) pairs of ``keys``, in their order."""
        by = {(q.id, t.name): (q, t) for q in self.queries for t in q.targets}
        return [by[k] for k in keys if k in by]

    @property
    def estimated(self) -> list[Pair]:
        """The pairs measured by estimation, not by counting (``Sites.estimated``)."""
        return self.pairs(self._placed().estimated)

    @property
    def monitor_measured(self) -> list[Pair]:
        """The measured pairs the monitor reduces from records (``Sites.monitor``)."""
        return self.pairs(self._placed().monitor)

    @property
    def host_reduced(self) -> dict[str, list[Pair]]:
        """Per cluster host, the pairs its agent reduces to frames (``Sites.hosts``)."""
        return {host: self.pairs(keys) for host, keys in self._placed().hosts}

    @property
    def measured(self) -> list[Pair]:
        """Every pair measured from records, wherever it is reduced."""
        return self.monitor_measured + [p for pairs in self.host_reduced.values() for p in pairs]

    @property
    def summarized_states(self) -> dict[str, int]:
        """Stages whose states their host's agent reduces -> its frame (``Sites.host_states``)."""
        return dict(self._placed().host_states)

    def link_frames(self) -> dict[str, int]:
        """Link channel -> the frame of its occupancy queries (a device reduces its buffer on
        one frame grid)."""
        out: dict[str, int] = {}
        for q, t in self.estimated:
            if out.setdefault(t.name, q.frame_ns) != q.frame_ns:
                raise ConfigError(
                    f"query {q.text!r}: every occupancy query on the link channel "
                    f"{t.name!r} must use the same frame (the device reduces its buffer on "
                    f"one frame grid); found {out[t.name]} ns and {q.frame_ns} ns"
                )
        return out

    # -- the rules, asked once by ``sited`` --------------------------------------------------

    def _estimated(self, topology: Topology) -> Iterator[Pair]:
        """The (query, target) pairs measured by estimation, not by counting: the occupancy of
        a link channel, whose middle (the bus between its two buffers) cannot be seen — a
        virtual queue."""
        links = topology.link_names
        for q in self.queries:
            if q.metric == "occupancy":
                yield from ((q, t) for t in q.targets if t.name in links)

    def _measured(self, topology: Topology) -> Iterator[Pair]:
        """Every other (query, target) pair: measured directly from records."""
        virtual = {(q.id, t.name) for q, t in self._estimated(topology)}
        for q in self.queries:
            yield from ((q, t) for t in q.targets if (q.id, t.name) not in virtual)

    def _host_reduced(self, topology: Topology) -> dict[str, list[Pair]]:
        """The measured (query, target) pairs that a cluster host's agent reduces to frames
        itself (by host), so that their records stay there: every pair whose taps all lie on
        one host — a channel between two of its stages, one end of a channel to or from
        another host (a link's count or throughput), a value probe of one of its stages —
        and the latency of a link into a host, on that host: each item carries the time its
        producer's tap put it in (the producer's clock), the consumer's host pairs it with its
        removal. Not states (``_host_states``). Nothing when every record is kept."""
        kind = {r.name: r.kind for r in topology.resources}
        where = {s.name: s.resource for s in topology.stages}
        ends = {c.name: (c.src, c.dst) for c in topology.channels}
        links = topology.link_names
        out: dict[str, list[Pair]] = {}
        for q, t in self._measured(topology):
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
        return out

    def _host_states(self, topology: Topology) -> dict[str, int]:
        """Stages on cluster hosts whose states their host's agent reduces to frames itself
        (stage -> the frame it reduces them on: the greatest common divisor of its state
        queries' frames, whose every frame is made of whole frames of it), so that their
        records stay there: every such stage. Nothing when every record is kept."""
        kind = {r.name: r.kind for r in topology.resources}
        on_host = {s.name for s in topology.stages if kind.get(s.resource) == "host"}
        frames: dict[str, set[int]] = {}
        for q in self.queries:
            if q.metric == "state":
                for t in q.targets:
                    if t.name in on_host:
                        frames.setdefault(t.name, set()).add(q.frame_ns)
        return {stage: math.gcd(*f) for stage, f in frames.items()}

    # -- serialised: the monitor process receives the plan whole -----------------------------

    def to_dict(self) -> dict[str, Any]:
        """What the run file keeps of the plan (each query's text, specs and taps)."""
        return {
            "queries": [q.to_dict() for q in self.queries],
            "taps": sorted([kind, name] for kind, name in self.taps),
        }

    def dumps(self) -> str:
        """The whole plan, sites included, as JSON (``loads`` reads it back equal)."""
        return json.dumps(_encode(self))

    @classmethod
    def loads(cls, text: str) -> Plan:
        plan = _decode(json.loads(text))
        if not isinstance(plan, Plan):
            raise ValueError("not a serialised plan")
        return plan


def _types() -> dict[str, type]:
    """The frozen value types a plan is made of, by name."""
    from streamscope.aggregate import specs
    from streamscope.query import ast

    out: dict[str, type] = {
        name: value
        for module in (specs, ast)
        for name, value in vars(module).items()
        if isinstance(value, type) and is_dataclass(value) and value.__module__ == module.__name__
    }
    out.update({t.__name__: t for t in (TargetPlan, CompiledQuery, Sites, Plan)})
    return out


def _encode(value: Any) -> Any:
    """A frozen value as JSON: each dataclass tagged with its type, sets sorted."""
    if is_dataclass(value) and not isinstance(value, type):
        return {"@": type(value).__name__,
                **{f.name: _encode(getattr(value, f.name)) for f in fields(value)}}  # fmt: skip
    if isinstance(value, frozenset):
        return {"@set": sorted((_encode(v) for v in value), key=json.dumps)}
    if isinstance(value, tuple | list):
        return [_encode(v) for v in value]
    return value


def _decode(value: Any, types: dict[str, type] | None = None) -> Any:
    types = types if types is not None else _types()
    if isinstance(value, dict):
        if "@set" in value:
            return frozenset(_decode(v, types) for v in value["@set"])
        kind = types[value["@"]]
        return kind(**{k: _decode(v, types) for k, v in value.items() if k != "@"})
    if isinstance(value, list):
        return tuple(_decode(v, types) for v in value)
    return value
