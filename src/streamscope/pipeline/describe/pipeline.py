"""Describing a pipeline: stages, the resources they run on, and the channels between them.

In: user code and wiring. Out: a validated ``Pipeline`` and its static ``Topology``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

from streamscope.core.errors import PipelineError
from streamscope.core.topology import (
    ChannelInfo,
    ProbeInfo,
    ResourceInfo,
    StageInfo,
    Topology,
    UserProbeInfo,
)
from streamscope.pipeline.channels.shm import DEFAULT_SLOT_BYTES
from streamscope.pipeline.describe.probedecl import declare_probe
from streamscope.pipeline.describe.resources import THREAD, LinkSpec, Resource, resolve
from streamscope.pipeline.describe.specs import (
    FANIN,
    FANOUT,
    LOOP_LAG,
    ChannelSpec,
    StageSpec,
    StorageSpec,
    TraceSpec,
)
from streamscope.pipeline.describe.stage import StageBody, as_source
from streamscope.pipeline.kinds import RunsIn, channel_transport, kind_of, link_end
from streamscope.timebase.emulated import EmulatedClockSpec


class Pipeline:
    """Stages connected by bounded FIFO channels.

    >>> p = Pipeline("demo")
    >>> p.add("numbers", range(10))
    'numbers'
    >>> p.add("square", lambda x: x * x)
    'square'
    >>> p.add("show", print)
    'show'
    >>> p.chain("numbers", "square", "show", capacity=4)

    A stage with no inputs is a source: a generator function, a function returning an iterable,
    or an iterable. A stage with no outputs is a sink. Every other stage maps one item to one
    output (or none, if it returns None), or yields several when it is a generator function.
    Objects with ``setup()``/``process(item)``/``teardown()`` (or ``generate()`` for a source)
    work too. With several outputs, items go round-robin (``fanout="broadcast"``: to each);
    with several inputs, items are taken round-robin (``fanin="zip"``: one from each, as a tuple).
    """

    def __init__(self, name: str = "pipeline") -> None:
        self.name = name
        self.stages: dict[str, StageSpec] = {}
        self.channels: dict[str, ChannelSpec] = {}
        #: Probes declared on stages, by ``STAGE.NAME``.
        self.probes: dict[str, UserProbeInfo] = {}
        #: Centralised probe storage parameters, by resource name (defaults where absent).
        self.storages: dict[str, StorageSpec] = {}
        #: Function tracing, when asked for (``trace``).
        self.tracing: TraceSpec | None = None

    def trace(
        self,
        *modules: str,
        stages: Sequence[str] = ("*",),
        exclude: Sequence[str] = (),
        max_calls_per_s: float | None = None,
    ) -> None:
        """Trace function calls (enter and exit, with timestamps) in the threads of the stages
        matching ``stages`` (fnmatch patterns): the stages' own code, and every function and
        method defined in ``modules`` (``"pkg.mod"``, or ``"pkg.mod:pattern"`` for some of
        them). ``exclude``: patterns of names (``module:qualname`` or ``qualname``) never
        traced; ``max_calls_per_s``: a function called more often than this is left out from
        then on (and listed in the run file). Switch tracing off and on while running with
        ``streamscope.tracing(False)``. Adds per-stage profiles to the run file and enter/exit
        slices to ``streamscope export``."""
        import importlib
        from fnmatch import fnmatchcase

        for pattern in stages:
            if not any(fnmatchcase(name, pattern) for name in self.stages):
                known = ", ".join(self.stages) or "(none)"
                raise PipelineError(f"trace: no stage matches {pattern!r}; stages: {known}")
        for entry in modules:
            name = entry.partition(":")[0]
            try:
                importlib.import_module(name)
            except ImportError as e:
                raise PipelineError(f"trace: cannot import module {name!r}: {e}") from None
        if max_calls_per_s is not None and max_calls_per_s <= 0:
            raise PipelineError(f"trace: max_calls_per_s must be positive, not {max_calls_per_s}")
        self.tracing = TraceSpec(tuple(modules), tuple(stages), tuple(exclude), max_calls_per_s)

    def traced_stages(self) -> tuple[str, ...]:
        """Stages whose threads record traced calls."""
        from fnmatch import fnmatchcase

        if self.tracing is None:
            return ()
        pats = self.tracing.stages
        return tuple(s for s in self.stages if any(fnmatchcase(s, p) for p in pats))

    def probe(
        self,
        stage: str,
        name: str,
        kind: str = "sampler",
        *,
        storage: str = "distributed",
        trigger: Sequence[str] = (),
        reset_on_mismatch: bool = False,
        period_us: float | None = None,
        members: Sequence[str] = (),
    ) -> str:
        """Declare a probe on ``stage``; returns its query name ``STAGE.NAME``.

        ``kind``: ``sampler`` (captures values: ``streamscope.probe(NAME).sample(v)``; query
        ``sample(STAGE.NAME)``), ``counter`` (``.count(n)``; query ``counter(STAGE.NAME)``),
        ``timer`` (``.start()``/``.stop()``, each interval's length; query
        ``timer(STAGE.NAME)``) or ``global`` (``.fire()`` makes its ``members``, samplers of
        the same stage, each capture the value it holds, at the same ticks).

        ``storage`` (samplers): ``distributed``, a buffer per probe, or ``centralized``, one
        buffer per resource shared by its probes through an arbiter (see ``probe_storage``),
        where contention drops samples -- each one counted. ``trigger`` (samplers and
        counters): conditions such as ``"> 100"`` or ``"== 4 & 0xf"`` (masked) that values
        passed to ``sample``/``observe`` must match in order; the probe captures (or counts)
        when the last one matches. By default a value that matches nothing is ignored; with
        ``reset_on_mismatch`` it sends the trigger back to its first condition. ``period_us``
        (samplers): time-driven sampling, at most one capture per period, at the first
        ``sample`` after each period boundary (skipped boundaries are counted).
        A probe records only when a query uses it.
        """
        info = declare_probe(
            stage, name, kind, storage=storage, trigger=trigger,
            reset_on_mismatch=reset_on_mismatch, period_us=period_us, members=members,
            stages=self.stages, declared=self.probes,
        )  # fmt: skip
        self.probes[info.name] = info
        return info.name

    def probe_storage(
        self,
        resource: str | Resource,
        *,
        ports: int = 2,
        capacity: int = 1 << 16,
        hold: int = 1,
        cycle_ticks: int = 1,
    ) -> None:
        """Parameters of ``resource``'s centralised probe storage: ``ports`` writes per clock
        cycle (2: a dual-port block RAM), ``capacity`` records between two collections (a
        power of two), ``hold`` samples a probe can hold while it waits for a port, and
        ``cycle_ticks`` clock ticks per cycle where a sample gives no cycle of its own."""
        rname = resource.name if isinstance(resource, Resource) else resource
        rname = THREAD.name if rname == "thread" else rname
        known = list(dict.fromkeys(st.resource.name for st in self.stages.values()))
        if rname not in known:
            raise PipelineError(
                f"probe storage: no stage runs on resource {rname!r}; resources: "
                f"{', '.join(known) or '(none)'} ('thread' is {THREAD.name!r})"
            )
        if min(ports, capacity, hold, cycle_ticks) < 1 or capacity & (capacity - 1):
            raise PipelineError(
                f"probe storage of {rname!r}: ports, hold and cycle_ticks must be at least 1 "
                f"and capacity a power of two (got ports={ports}, capacity={capacity}, "
                f"hold={hold}, cycle_ticks={cycle_ticks})"
            )
        self.storages[rname] = StorageSpec(ports, capacity, hold, cycle_ticks)

    def add(
        self,
        name: str,
        fn: Any,
        *,
        resource: str | Resource = "thread",
        fanout: str = "roundrobin",
        fanin: str = "roundrobin",
    ) -> str:
        if not name or "->" in name or name.strip() != name:
            raise PipelineError(
                f"bad stage name {name!r}: use a non-empty name without '->' or surrounding spaces"
            )
        if name in self.stages:
            raise PipelineError(f"stage {name!r} is defined twice")
        if fanout not in FANOUT:
            raise PipelineError(
                f"stage {name!r}: fanout must be one of {', '.join(FANOUT)}, not {fanout!r}"
            )
        if fanin not in FANIN:
            raise PipelineError(
                f"stage {name!r}: fanin must be one of {', '.join(FANIN)}, not {fanin!r}"
            )
        obj = as_source(fn)
        StageBody(name, obj)  # refuse what cannot be a stage now, not when the run starts
        where = resolve(resource, name)
        if kind_of(where).event_loop and not any(
            s.resource == where for s in self.stages.values()
        ):  # the loop's lag, measured from its first stage (``pipeline/run/aio.py``)
            lag = f"{name}.{LOOP_LAG}"
            self.probes[lag] = UserProbeInfo(lag, name, "timer")
        self.stages[name] = StageSpec(name, obj, where, fanout, fanin)
        return name

    def connect(
        self,
        src: str,
        dst: str,
        *,
        capacity: int = 64,
        name: str | None = None,
        slot_bytes: int = DEFAULT_SLOT_BYTES,
    ) -> str:
        for s in (src, dst):
            if s not in self.stages:
                known = ", ".join(self.stages) or "(none)"
                raise PipelineError(
                    f"cannot connect {src!r} -> {dst!r}: unknown stage {s!r}; known stages: {known}"
                )
        if capacity < 1:
            raise PipelineError(
                f"channel {src} -> {dst}: capacity must be at least 1, not {capacity}"
            )
        cname = name or f"{src} -> {dst}"
        if cname in self.channels:
            raise PipelineError(
                f"channel {cname!r} exists already; pass name= to connect the same stages twice"
            )
        self.channels[cname] = ChannelSpec(cname, src, dst, capacity, slot_bytes)
        return cname

    def chain(self, *names: str, capacity: int = 64) -> None:
        """Connect each stage to the next."""
        for a, b in itertools.pairwise(names):
            self.connect(a, b, capacity=capacity)

    def inputs(self, stage: str) -> list[ChannelSpec]:
        return [c for c in self.channels.values() if c.dst == stage]

    def outputs(self, stage: str) -> list[ChannelSpec]:
        return [c for c in self.channels.values() if c.src == stage]

    def role(self, stage: str) -> str:
        if not self.inputs(stage):
            return "source"
        if not self.outputs(stage):
            return "sink"
        return "stage"

    def validate(self) -> None:
        """Refuse pipelines that cannot run: no stages, a cycle, a disconnected stage."""
        if not self.stages:
            raise PipelineError(f"pipeline {self.name!r} has no stages")
        if len(self.stages) > 1:
            lonely = [s for s in self.stages if not self.inputs(s) and not self.outputs(s)]
            if lonely:
                raise PipelineError(f"stage {lonely[0]!r} is not connected to any other stage")
        indeg = {s: len(self.inputs(s)) for s in self.stages}
        ready = [s for s, d in indeg.items() if d == 0]
        seen = 0
        while ready:
            s = ready.pop()
            seen += 1
            for c in self.outputs(s):
                indeg[c.dst] -= 1
                if indeg[c.dst] == 0:
                    ready.append(c.dst)
        if seen != len(self.stages):
            raise PipelineError(
                f"pipeline {self.name!r} has a cycle; channels must form a directed acyclic graph"
            )
        self._check_hosts()

    def channel_transport(self, ch: ChannelSpec) -> str:
        """``thread`` when both ends share a process, ``link`` across a device boundary or
        between hosts, else ``process`` (``kinds.channel_transport``)."""
        a, b = self.stages[ch.src].resource, self.stages[ch.dst].resource
        return channel_transport(kind_of(a), kind_of(b), shared=a == b)

    def link_of(self, ch: ChannelSpec) -> LinkSpec | None:
        """The bus or network a link channel crosses (the device's; between hosts, the
        consumer's host's, else the producer's), None for any other channel."""
        a, b = self.stages[ch.src].resource, self.stages[ch.dst].resource
        if self.channel_transport(ch) != "link":
            return None
        end = link_end(kind_of(a), kind_of(b))
        if end is None:
            raise PipelineError(
                f"channel {ch.name!r} joins two {a.kind}s ({a.name}, {b.name}); only host <-> "
                f"{a.kind} channels are supported"
            )
        return a.link if end == "src" else b.link

    def hosts(self) -> tuple[str, ...]:
        """The cluster hosts the stages are placed on, in order of first use."""
        return tuple(
            dict.fromkeys(
                s.resource.name
                for s in self.stages.values()
                if kind_of(s.resource).runs_in is RunsIn.CLUSTER
            )
        )

    def _check_hosts(self) -> None:
        """A host's channels reach only other hosts and the pipeline's own process (whose
        threads call the cluster); a forked process or device cannot share the cluster."""
        if not self.hosts():
            return
        for s in self.stages.values():
            if kind_of(s.resource).runs_in is RunsIn.CHILD:
                raise PipelineError(
                    f"stage {s.name!r} is on {s.resource.kind} {s.resource.name!r}, in a pipeline "
                    f"with hosts ({', '.join(self.hosts())}): a pipeline with hosts places its "
                    "other stages in its own process (threads or asyncio) or on hosts"
                )
        traced = [
            s
            for s in self.traced_stages()
            if kind_of(self.stages[s].resource).runs_in is RunsIn.CLUSTER
        ]
        if traced:
            raise PipelineError(
                f"stage {traced[0]!r} is on host {self.stages[traced[0]].resource.name!r}: "
                "function tracing runs in the pipeline's own process only"
            )

    def topology(self, probes: tuple[ProbeInfo, ...] = ()) -> Topology:
        resources: dict[str, ResourceInfo] = {}
        for st in self.stages.values():
            r = st.resource
            tick = EmulatedClockSpec.parse(r.clock).tick_ns if r.clock else 1.0
            resources.setdefault(r.name, ResourceInfo(r.name, r.kind, r.domain, tick))
        return Topology(
            name=self.name,
            resources=tuple(resources.values()),
            stages=tuple(
                StageInfo(s.name, s.resource.name, self.role(s.name), "", s.fanout, s.fanin)
                for s in self.stages.values()
            ),
            channels=tuple(self._channel_info(c) for c in self.channels.values()),
            probes=probes,
            user_probes=tuple(self.probes.values()),
        )

    def _channel_info(self, c: ChannelSpec) -> ChannelInfo:
        link = self.link_of(c)
        if link is None:
            return ChannelInfo(c.name, c.src, c.dst, c.capacity, self.channel_transport(c))
        return ChannelInfo(
            c.name, c.src, c.dst, c.capacity, "link", min(link.bulk_size, c.capacity),
            link.transfer_ns,
            link.latency_ns, None if math.isinf(link.timeout_ns) else link.timeout_ns,
        )  # fmt: skip
