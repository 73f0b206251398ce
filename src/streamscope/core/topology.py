"""The static shape of a run: resources, stages, channels and the probes placed on them.

Built by ``pipeline`` before a run starts, stored by ``store``, read back by everything after it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from streamscope.core.errors import PipelineError

#: The host's clock domain: every thread and process of the host reads its monotonic clock; the
#: reference the other domains are mapped onto.
HOST = "host"


def path_ends(name: str) -> tuple[str, str]:
    """A path target's first and last stage (its name is ``SRC ~> DST``)."""
    src, _, dst = name.partition(" ~> ")
    return src, dst


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """Where stages run. ``kind`` is ``thread``, ``asyncio``, ``process``, ``device`` or ``host``."""

    name: str
    kind: str
    clock_domain: str = HOST
    tick_period_ns: float = 1.0


@dataclass(frozen=True, slots=True)
class StageInfo:
    """One stage. ``role`` is ``source`` (no inputs), ``sink`` (no outputs) or ``stage``;
    ``named_by``, for a program's stage, how its name was found (``given``: the name the
    program gave its thread, process or task; ``function``: the program's own function its
    workers run; ``target``: what the thread or process was started with; ``place``: that,
    numbered by its place in the flow, as another stage runs the same)."""

    name: str
    resource: str
    role: str
    named_by: str = ""
    #: How the stage deals its outputs (``roundrobin`` or ``broadcast``) and takes its inputs
    #: (``roundrobin`` or ``zip``) when it has several.
    fanout: str = "roundrobin"
    fanin: str = "roundrobin"


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A bounded FIFO from ``src`` to ``dst``; ``name`` is ``"src -> dst"`` unless given.

    ``transport``: ``thread`` (one process), ``process`` (shared memory between processes) or
    ``link`` (across a device boundary: a buffer of ``capacity`` at each end and a bulk-transfer
    bus between them, described by the ``bulk_size``.. ``timeout_ns`` fields; None: no timeout).
    """

    name: str
    src: str
    dst: str
    capacity: int
    transport: str = "thread"
    bulk_size: int = 0
    transfer_ns: float = 0.0
    latency_ns: float = 0.0
    timeout_ns: float | None = None

    @property
    def is_link(self) -> bool:
        return self.transport == "link"


@dataclass(frozen=True, slots=True)
class ChannelEnd:
    """A stage at an end of a channel besides its ``src`` and ``dst``: another producer
    (``side`` ``tail``) or consumer (``head``) of a queue that several stages put into (a
    fan-in) or take from (a fan-out)."""

    channel: str
    stage: str
    side: str


@dataclass(frozen=True, slots=True)
class ProbeInfo:
    """An active probe. ``kind``: ``tail``/``head`` (channel ends), ``send``/``deliver`` (the
    two inner ends of a link channel: items leaving the tail buffer for the bus, and items
    entering the head buffer from it), ``state`` (stage tracker), ``iteration``/``input_wait``/
    ``output_wait`` (per-iteration durations of a stage's loop), ``sampler``/``counter``/``timer``
    (declared by the user with ``Pipeline.probe``; target ``STAGE.NAME``), ``trace`` (function
    enter/exit of one stage). ``storage``: where a sampler's records go, ``centralized`` or
    ``distributed`` (empty for the others, which always have a buffer of their own)."""

    id: int
    kind: str
    target: str
    domain: str = HOST
    storage: str = ""


#: Probe kinds a user declares on a stage with ``Pipeline.probe`` and queries can measure.
USER_PROBE_KINDS: tuple[str, ...] = ("sampler", "counter", "timer")
#: ... and a global trigger, which makes its member samplers capture at the same ticks.
DECLARABLE_KINDS: tuple[str, ...] = (*USER_PROBE_KINDS, "global")


@dataclass(frozen=True, slots=True)
class UserProbeInfo:
    """A probe declared on a stage (``Pipeline.probe``): ``name`` is ``STAGE.NAME``. It becomes
    active (a :class:`ProbeInfo`) when a query uses it."""

    name: str
    stage: str
    kind: str
    storage: str = "distributed"
    #: A sampler's or counter's trigger: conditions matched in order (``"> 100"``,
    #: ``"== 4 & 0xf"``); empty: every value counts.
    trigger: tuple[str, ...] = ()
    reset_on_mismatch: bool = False
    #: A sampler's period (ns): it captures at most once per period (time-driven).
    period_ns: int = 0
    #: A global trigger's member samplers (their short names).
    members: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Topology:
    name: str
    resources: tuple[ResourceInfo, ...] = ()
    stages: tuple[StageInfo, ...] = ()
    channels: tuple[ChannelInfo, ...] = ()
    probes: tuple[ProbeInfo, ...] = field(default=())
    user_probes: tuple[UserProbeInfo, ...] = field(default=())
    #: Traced functions, ``module:qualname``; a function's id (in ENTER/EXIT records) is its
    #: index + 1.
    functions: tuple[str, ...] = field(default=())
    #: Every channel's producers and consumers besides its ``src`` and ``dst``, in the order
    #: they appeared (a program's queue that more stages put into as the run goes on).
    ends: tuple[ChannelEnd, ...] = field(default=())

    def stage(self, name: str) -> StageInfo:
        for s in self.stages:
            if s.name == name:
                return s
        known = ", ".join(s.name for s in self.stages) or "(none)"
        raise PipelineError(f"unknown stage {name!r}; known stages: {known}")

    def channel(self, name: str) -> ChannelInfo:
        for c in self.channels:
            if c.name == name:
                return c
        known = ", ".join(c.name for c in self.channels) or "(none)"
        raise PipelineError(f"unknown channel {name!r}; known channels: {known}")

    def probe(self, probe_id: int) -> ProbeInfo:
        for p in self.probes:
            if p.id == probe_id:
                return p
        raise KeyError(probe_id)

    def producers(self, c: ChannelInfo) -> tuple[str, ...]:
        """Every stage that puts into ``c``: its ``src``, then the others (``ends``)."""
        return (c.src, *(e.stage for e in self.ends if e.channel == c.name and e.side == "tail"))

    def consumers(self, c: ChannelInfo) -> tuple[str, ...]:
        """Every stage that takes from ``c``: its ``dst``, then the others (``ends``)."""
        return (c.dst, *(e.stage for e in self.ends if e.channel == c.name and e.side == "head"))

    def links(self) -> tuple[tuple[ChannelInfo, str, str], ...]:
        """Every (channel, producer, consumer) pair: one per channel but for a channel that
        several stages put into or take from, which links each of them to each at the other
        end."""
        if not self.ends:
            return tuple((c, c.src, c.dst) for c in self.channels)
        return tuple(
            (c, a, b) for c in self.channels for a in self.producers(c) for b in self.consumers(c)
        )

    # -- facts every layer asks of a topology (one place, so they never disagree) ---------

    @property
    def link_names(self) -> frozenset[str]:
        """Channels that cross a device boundary (``transport == "link"``)."""
        return frozenset(c.name for c in self.channels if c.is_link)

    def stage_domains(self) -> dict[str, str]:
        """Each stage's clock domain: its resource's (the host's if it has none)."""
        domain = {r.name: r.clock_domain for r in self.resources}
        return {s.name: domain.get(s.resource, HOST) for s in self.stages}

    def crossing_channels(self) -> frozenset[str]:
        """Channels whose two ends are in different clock domains (their figures carry the
        clocks' uncertainty)."""
        where = self.stage_domains()
        return frozenset(
            c.name for c in self.channels if where.get(c.src, HOST) != where.get(c.dst, HOST)
        )

    def crossing_targets(self, names: Iterable[str]) -> frozenset[str]:
        """Of ``names`` (channels and paths ``SRC ~> DST``), those whose two ends are in
        different clock domains: their figures carry the clocks' uncertainty."""
        where = self.stage_domains()
        channels = self.crossing_channels()
        out = set()
        for name in names:
            if " ~> " in name:
                src, dst = path_ends(name)
                if where.get(src, HOST) != where.get(dst, HOST):
                    out.add(name)
            elif name in channels:
                out.add(name)
        return frozenset(out)

    def route(self, src: str, dst: str) -> tuple[ChannelInfo, ...]:
        """The channels on some way from stage ``src`` to stage ``dst`` (in the topology's
        order): those whose producer ``src`` reaches and whose consumer reaches ``dst``. Empty
        when ``dst`` is not downstream of ``src``."""

        def reach(start: str, forward: bool) -> set[str]:
            seen, todo = {start}, [start]
            links = self.links()
            while todo:
                at = todo.pop()
                for _, a, b in links:
                    here, there = (a, b) if forward else (b, a)
                    if here == at and there not in seen:
                        seen.add(there)
                        todo.append(there)
            return seen

        if src == dst:
            return ()
        down, up = reach(src, True), reach(dst, False)
        on = {c.name for c, a, b in self.links() if a in down and b in up}
        return tuple(c for c in self.channels if c.name in on)

    def resource_of(self, stage: str) -> str:
        """The resource ``stage`` runs on (``""`` if it is not a stage of this topology)."""
        return next((s.resource for s in self.stages if s.name == stage), "")

    def tick_periods(self) -> dict[str, float]:
        """Each clock domain's nominal tick period (ns)."""
        return {r.clock_domain: r.tick_period_ns for r in self.resources}

    def probe_domains(self) -> dict[int, str]:
        """Each probe's clock domain (its records' ticks), by probe id."""
        return {p.id: p.domain for p in self.probes}

    def merged(self, found: Topology) -> Topology:
        """This topology with what ``found`` adds (resources, stages and channels by name,
        probes by id, channel ends by channel, stage and end, each the first declared); itself
        when nothing is new."""
        return Known(self).grow(self, found)

    def to_dict(self) -> dict[str, Any]:
        """As ``dataclasses.asdict`` makes it (its parts are flat: fields of plain values), at a
        fraction of its cost: a program declares a topology per queue it makes."""
        out: dict[str, Any] = {"name": self.name}
        for name in _names(Topology)[1:]:
            value = getattr(self, name)
            out[name] = tuple(x if isinstance(x, str) else _flat(x) for x in value) if value else ()
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Topology:
        return cls(
            name=d["name"],
            resources=tuple(ResourceInfo(**r) for r in d.get("resources", ())),
            stages=tuple(StageInfo(**s) for s in d.get("stages", ())),
            channels=tuple(ChannelInfo(**c) for c in d.get("channels", ())),
            probes=tuple(ProbeInfo(**p) for p in d.get("probes", ())),
            user_probes=tuple(_user_probe(p) for p in d.get("user_probes", ())),
            functions=tuple(d.get("functions", ())),
            ends=tuple(ChannelEnd(**e) for e in d.get("ends", ())),
        )


def _flat(part: Any) -> dict[str, Any]:
    return {name: getattr(part, name) for name in _names(type(part))}


#: The field names of each dataclass flattened so far (``dataclasses.fields`` is slow for a
#: program declaring a topology per queue and per thread): filled as used, by any thread of the
#: process, a name list being the same whoever fills it.
_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def _names(cls: type) -> tuple[str, ...]:
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in fields(cls))
    return names


def _user_probe(d: dict[str, Any]) -> UserProbeInfo:
    lists = {k: tuple(d.get(k, ())) for k in ("trigger", "members")}
    return UserProbeInfo(**{**d, **lists})


class Known:
    """The names (and probe ids) of a topology that grows while a run goes on, kept so that
    what a declaration adds is found in the time of the declaration, whatever the size of what
    is known already (``Topology.merged`` looks at everything every time)."""

    __slots__ = ("channels", "ends", "probes", "resources", "stages")

    def __init__(self, topology: Topology) -> None:
        self.resources = {r.name for r in topology.resources}
        self.stages = {s.name for s in topology.stages}
        self.channels = {c.name for c in topology.channels}
        self.probes = {p.id for p in topology.probes}
        self.ends = {(c.name, c.src, "tail") for c in topology.channels}
        self.ends |= {(c.name, c.dst, "head") for c in topology.channels}
        self.ends |= {(e.channel, e.stage, e.side) for e in topology.ends}

    def grow(self, topology: Topology, *found: Topology) -> Topology:
        """``topology`` (whose names these are) with what the declarations ``found`` add, each
        the first declared; ``topology`` itself when nothing is new. Many declarations at once
        copy what is known once, not once each. A channel declared again with other stages at
        its ends (a queue a new stage puts into) adds them as its ``ends``."""
        new_res = self._new([r for f in found for r in f.resources], self.resources, _name)
        new_stg = self._new([s for f in found for s in f.stages], self.stages, _name)
        new_chn = self._new([c for f in found for c in f.channels], self.channels, _name)
        new_prb = self._new([p for f in found for p in f.probes], self.probes, _id)
        for c in new_chn:
            self.ends.update(((c.name, c.src, "tail"), (c.name, c.dst, "head")))
        seen_ends = [
            ChannelEnd(c.name, stage, side)
            for f in found
            for c in f.channels
            for stage, side in ((c.src, "tail"), (c.dst, "head"))
        ] + [e for f in found for e in f.ends]
        new_end = self._new(seen_ends, self.ends, _end)
        if not (new_res or new_stg or new_chn or new_prb or new_end):
            return topology
        return replace(
            topology, resources=topology.resources + new_res,
            stages=topology.stages + new_stg, channels=topology.channels + new_chn,
            probes=topology.probes + new_prb, ends=topology.ends + new_end,
        )  # fmt: skip

    @staticmethod
    def _new(items: Sequence[Any], known: set[Any], key: Callable[[Any], Any]) -> tuple[Any, ...]:
        out = []
        for it in items:
            k = key(it)
            if k not in known:
                known.add(k)
                out.append(it)
        return tuple(out)


def _name(item: Any) -> Any:
    return item.name


def _end(item: ChannelEnd) -> Any:
    return (item.channel, item.stage, item.side)


def _id(item: Any) -> Any:
    return item.id


_NUMBER = re.compile(r" #\d+(?= -> |$)")
#: Past this many, the stages, channels or targets of a query that a program made many of
#: (numbered alike: ``#2``, ``#3``, ...) are shown one per family, their figures together: a
#: row or a figure per member would bury the few that matter under thousands alike.
FAMILY_AT = 12


def family(name: str) -> str:
    """The family of a stage or channel a program made many of: its name without the numbers
    that told them apart (``produce #26 -> consume #26``: ``produce -> consume``)."""
    return _NUMBER.sub("", name)


#: Per-iteration probes a query can place on any stage (no declaration needed).
ITERATION_KINDS = ("iteration", "input_wait", "output_wait")


def plan_probes(topology: Topology, taps: frozenset[tuple[str, str]]) -> tuple[ProbeInfo, ...]:
    """Give each needed tap an integer id, in a stable order (channels, then stages)."""
    domain = {r.name: r.clock_domain for r in topology.resources}
    stage_domain = {s.name: domain.get(s.resource, HOST) for s in topology.stages}
    out: list[ProbeInfo] = []
    for ch in topology.channels:
        ends: tuple[str, ...] = ("tail", "head")
        if ch.is_link and (("tail", ch.name) in taps or ("head", ch.name) in taps):
            # A link's sub-queues are watched whole: each needs both of its ends.
            ends = ("tail", "send", "deliver", "head")
            taps = taps | {(e, ch.name) for e in ends}
        for end in (*ends, "depart", "arrive"):
            if (end, ch.name) in taps:
                owner = ch.src if end in ("tail", "send", "depart") else ch.dst
                out.append(ProbeInfo(len(out) + 1, end, ch.name, stage_domain.get(owner, HOST)))
    for st in topology.stages:
        for kind in ("state", *ITERATION_KINDS):
            if (kind, st.name) in taps:
                out.append(ProbeInfo(len(out) + 1, kind, st.name, stage_domain[st.name]))
    for st in topology.stages:
        if ("trace", st.name) in taps:
            # The tracer reads the host clock wherever the stage runs.
            out.append(ProbeInfo(len(out) + 1, "trace", st.name, HOST))
    for up in topology.user_probes:
        if (up.kind, up.name) in taps:
            storage = up.storage if up.kind == "sampler" else ""
            out.append(ProbeInfo(len(out) + 1, up.kind, up.name, stage_domain[up.stage], storage))
    return tuple(out)
