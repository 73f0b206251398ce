"""One process's share of a pipeline: its taps, its state trackers and its stage threads.

In: the pipeline, its channels, the active probes and the stages this process runs. Out: taps
attached to those channels (for the process's agent) and the started stage threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from streamscope.core import native
from streamscope.core.records import Kind
from streamscope.core.stream import Aborted
from streamscope.core.topology import USER_PROBE_KINDS, ProbeInfo, UserProbeInfo
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.channels.shm import ProcessChannel
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.describe.specs import ITERATION_KINDS, StorageSpec
from streamscope.pipeline.kinds import kind_of
from streamscope.pipeline.run.aio import start_loop
from streamscope.pipeline.run.worker import Channel, LoopStats, StageProbes, run_stage
from streamscope.probes import tracing
from streamscope.probes.hardware import Trigger, parse_condition
from streamscope.probes.stacks import ProcessStacks, asked_period
from streamscope.probes.storage import make_storage
from streamscope.probes.taps import (
    COST_CALL,
    COST_COUNTER,
    COST_INTERVAL,
    COST_NATIVE,
    Recorder,
    RingTap,
    host_clock,
    make_tracker,
)
from streamscope.probes.user import (
    CounterProbe,
    GlobalProbe,
    NullProbe,
    SamplerProbe,
    TimerProbe,
    UserProbe,
    register_stage,
)
from streamscope.timebase.emulated import EmulatedClockSpec


def _short(up: UserProbeInfo) -> str:
    """A declared probe's name on its stage (``NAME`` of ``STAGE.NAME``)."""
    return up.name[len(up.stage) + 1 :]


def _storage(scheme: str, params: StorageSpec, rec: Recorder, rtl: str = "") -> Any:
    """Sample storage of ``scheme``: one buffer shared through an arbiter (``centralized``,
    with the resource's ``params``), or a buffer per probe (``distributed``); ``rtl``: the
    storage core of that scheme, simulated by ``rtl`` (``hw.rtl``)."""
    if rtl:
        from streamscope.hw.rtl import RtlStorage

        if scheme == "centralized":
            return RtlStorage(
                scheme, Kind.SAMPLE, recorder=rec, capacity=params.capacity, ports=params.ports,
                hold=params.hold, cycle_ticks=params.cycle_ticks, sim=rtl,
            )  # fmt: skip
        return RtlStorage(scheme, Kind.SAMPLE, recorder=rec, capacity=rec.capacity, sim=rtl)
    if scheme == "centralized":
        return make_storage(
            "centralized", Kind.SAMPLE, recorder=rec, capacity=params.capacity,
            ports=params.ports, hold=params.hold, cycle_ticks=params.cycle_ticks,
        )  # fmt: skip
    return make_storage("distributed", Kind.SAMPLE, recorder=rec, capacity=rec.capacity)


def _trigger(up: UserProbeInfo) -> Trigger | None:
    if not up.trigger:
        return None
    conditions = [parse_condition(c, f"probe {up.name}") for c in up.trigger]
    return Trigger(conditions, reset_on_mismatch=up.reset_on_mismatch)


@dataclass(slots=True)
class _StageParts:
    """What one stage's loop records, gathered while the scope taps its probes one by one (so
    it is filled in after it is made)."""

    tracker: native.StateTracker | None = None
    iteration: dict[str, RingTap] = field(default_factory=dict)
    storages: list[Any] = field(default_factory=list)
    trace: tuple[tracing.FunctionTracer, tracing.TraceTap] | None = None
    state_probe: int = 0  # its state probe, where the monitor drains it (0: none)


#: A path's origin tags one item in about TAG_EVERY it puts (jittered), and no two tags closer
#: than TAG_MIN_GAP_NS: the period doubles while they come closer, so a fast origin tags about
#: 50,000 items a second and a slow one every item. With the channels' ends tapped a
#: tagged item costs ~8 ns more (benchmarks/bench_probe_core.py).
TAG_EVERY = 1
TAG_MIN_GAP_NS = 20_000


class ProcessShare:
    """The channels, taps and trackers of one process. Its taps come from ``recorder``: rings
    the monitor drains (or, for a device's own sub-queues, ``local``: private rings its agent
    reduces), all reading the process's clock."""

    def __init__(
        self,
        pipeline: Pipeline,
        channels: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        stages: list[str],
        recorder: Recorder | None = None,
        local: frozenset[int] = frozenset(),
        report: Callable[[str, LoopStats], None] | None = None,
    ) -> None:
        rec = recorder if recorder is not None else Recorder()
        #: Where each stage's loop hands its time figures at its end (a monitored run).
        self.report = report
        self.recorder = rec
        self.trackers: dict[str, native.StateTracker] = {}
        #: Taps drained here (private rings), not by the monitor.
        self.local_taps: list[RingTap] = []
        #: What holds the agent's watermark back (an RTL device's storage cores).
        self.holders: list[Callable[[], int | None]] = []
        self.now: Callable[[], int] = rec.clock.now
        self.tracer: tracing.FunctionTracer | None = None
        self._parts: dict[str, _StageParts] = {s: _StageParts() for s in stages}
        mine = set(stages)
        self.stacks: ProcessStacks | None = None
        self._declared(pipeline, probes, stages, rec)
        self._traced(probes, mine, rec)
        for p in probes:
            if p.kind == "state" and p.target in mine:
                self._tap_state(p, rec, p.id in local)
            elif p.kind in ITERATION_KINDS and p.target in mine:
                ring = rec.tap(p.id, Kind.DURATION, cost=COST_INTERVAL)
                self._parts[p.target].iteration[p.kind] = ring
            elif p.kind in ("tail", "head", "send", "deliver"):
                spec = pipeline.channels[p.target]
                owner = spec.src if p.kind in ("tail", "send") else spec.dst
                if owner in mine:
                    self._tap_channel(p, channels[p.target], rec, p.id in local)
        self._tag_paths(pipeline, channels, probes, mine, rec)
        # This process's stack sampler, where the run asked for one (a host-clock process whose
        # rings the monitor drains: a device's emulated clock is not the samples'); it stops
        # when the last stage it samples ends.
        sampled = sum(1 for s in mine if self._parts[s].state_probe)
        period = asked_period(rec.directory)
        if period and sampled and rec.directory is not None and rec.clock is host_clock():
            self.stacks = ProcessStacks(rec, rec.directory, period, stop_after=sampled)

    def _tag_paths(
        self,
        pipeline: Pipeline,
        channels: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        mine: set[str],
        rec: Recorder,
    ) -> None:
        """Paths followed item by item (``latency(SRC ~> DST)``): every channel between a
        path's origin (its ``depart`` probes) and its end (``arrive``) carries tags, the
        origin's tag one item in about ``TAG_EVERY`` (no two closer than ``TAG_MIN_GAP_NS``),
        the end's record their arrival."""
        ends = [p for p in probes if p.kind in ("depart", "arrive")]
        if not ends:
            return
        topology = pipeline.topology()
        spec = pipeline.channels
        starts = {spec[p.target].src for p in ends if p.kind == "depart"}
        stops = {spec[p.target].dst for p in ends if p.kind == "arrive"}
        for src in starts:
            for dst in stops:
                for c in topology.route(src, dst):
                    ch = channels.get(c.name)
                    if isinstance(ch, ThreadChannel | ProcessChannel):
                        if c.src in mine or c.dst in mine:
                            ch.keep_tags()
                    elif isinstance(ch, LinkChannel):  # each side in its own process
                        if c.src in mine:
                            ch.tail_buf.keep_tags()
                            ch.tagged = True
                        if c.dst in mine:
                            ch.head_buf.keep_tags()
        for p in ends:
            ch = channels.get(p.target)
            owner = spec[p.target].src if p.kind == "depart" else spec[p.target].dst
            if isinstance(ch, LinkChannel):
                ch = ch.tail_buf if p.kind == "depart" else ch.head_buf
            if owner not in mine or not isinstance(ch, ThreadChannel | ProcessChannel):
                continue
            ch.keep_tags()
            if p.kind == "depart":
                tap = rec.tap(p.id, Kind.DEPART, cost=COST_NATIVE)
                gap = max(1, round(TAG_MIN_GAP_NS / rec.clock.tick_ns))
                ch.tag_departures(tap.ring, TAG_EVERY, min_gap_ticks=gap, seed=p.id)
            else:
                ch.tag_arrivals(rec.tap(p.id, Kind.ARRIVE, cost=COST_NATIVE).ring)

    def _tap_state(self, p: ProbeInfo, rec: Recorder, private: bool) -> None:
        """The state tracker of stage ``p.target``."""
        tap = rec.tap(p.id, Kind.STATE, publish=not private)
        self.trackers[p.target] = make_tracker(p.target, tap)
        self._parts[p.target].state_probe = p.id if not private else 0
        self._parts[p.target].tracker = self.trackers[p.target]
        if private:
            self.local_taps.append(tap)

    def _tap_channel(self, p: ProbeInfo, ch: Channel, rec: Recorder, private: bool) -> None:
        """The ring of a channel's end ``p.kind`` (a link's ``send``/``deliver``: the end of
        its tail or head buffer), attached to the channel."""
        kind = Kind.PUT if p.kind in ("tail", "deliver") else Kind.GET
        if isinstance(ch, LinkChannel | ThreadChannel):
            # Recorded by the native FIFO itself, inside its lock.
            tap = rec.tap(p.id, kind, publish=not private, cost=COST_NATIVE)
            if isinstance(ch, LinkChannel):
                buf = ch.tail_buf if p.kind in ("tail", "send") else ch.head_buf
                setattr(buf, "tail" if kind == Kind.PUT else "head", tap.ring)
            else:
                setattr(ch, p.kind, tap.ring)
        else:
            tap = rec.tap(p.id, kind, publish=not private, cost=COST_CALL)
            setattr(ch, p.kind, tap.ring)
        if private:
            self.local_taps.append(tap)

    def _declared(
        self,
        pipeline: Pipeline,
        probes: tuple[ProbeInfo, ...],
        stages: list[str],
        rec: Recorder,
    ) -> None:
        """Handles of the probes declared on this process's stages (``Pipeline.probe``): live
        ones for the probes queries use, inactive ones for the rest; their taps and storage."""
        mine = set(stages)
        active = {p.target: p for p in probes if p.kind in USER_PROBE_KINDS}
        storages: dict[tuple[str, str], Any] = {}
        handles: dict[str, dict[str, UserProbe]] = {s: {} for s in stages}
        for up in pipeline.probes.values():
            if up.stage not in mine or up.kind == "global":
                continue  # a global trigger: after its members
            info = active.get(up.name)
            if info is None or info.kind != up.kind:
                handle: UserProbe = NullProbe(up.name, up.kind)
            elif up.kind == "sampler":
                handle = self._sampler(up, info, pipeline, rec, storages)
            elif up.kind == "counter":
                ctap = rec.tap(info.id, Kind.COUNT, capacity=0, cost=COST_COUNTER)
                handle = CounterProbe(up.name, ctap, _trigger(up))
            else:
                ring = rec.tap(info.id, Kind.DURATION, cost=COST_INTERVAL)
                handle = TimerProbe(up.name, ring, rec.clock.now)
            handles[up.stage][_short(up)] = handle
        for up in pipeline.probes.values():
            if up.kind == "global" and up.stage in mine:
                mem = [handles[up.stage][m] for m in up.members]
                live = tuple(m for m in mem if isinstance(m, SamplerProbe))
                handles[up.stage][_short(up)] = (
                    GlobalProbe(up.name, live, rec.clock.now)
                    if live
                    else NullProbe(up.name, "global")
                )
        for stage in stages:
            register_stage(stage, handles[stage])
        for store in storages.values():
            if hasattr(store, "hold_ticks"):  # an RTL device's core: its agent sends its rings
                self.local_taps += store.taps()
                self.holders.append(store.hold_ticks)

    def _sampler(
        self,
        up: UserProbeInfo,
        info: ProbeInfo,
        pipeline: Pipeline,
        rec: Recorder,
        storages: dict[tuple[str, str], Any],
    ) -> SamplerProbe:
        """A live sampler, writing into its resource's storage of its scheme (``storages``:
        those made so far, by resource and scheme)."""
        res = pipeline.stages[up.stage].resource
        store = storages.get((res.name, up.storage))
        if store is None:
            params = pipeline.storages.get(res.name, StorageSpec())
            store = storages[(res.name, up.storage)] = _storage(up.storage, params, rec, res.rtl)
        tick_ns = EmulatedClockSpec.parse(res.clock).tick_ns if res.clock else 1.0
        self._parts[up.stage].storages.append(store)
        return SamplerProbe(
            up.name, store.port(info.id), rec.clock.now, _trigger(up),
            round(up.period_ns / tick_ns) if up.period_ns else 0,
        )  # fmt: skip

    def _traced(self, probes: tuple[ProbeInfo, ...], mine: set[str], rec: Recorder) -> None:
        """A trace tap per traced stage of this process, bound in the stage's thread when it
        starts (the tracer reads the host clock wherever the stage runs)."""
        tracer = tracing.active()
        traced = [p for p in probes if p.kind == "trace" and p.target in mine]
        self.tracer = tracer if traced else None
        if tracer is not None and traced:
            host = Recorder(rec.directory, capacity=rec.capacity)
            for p in traced:
                ttap = tracing.TraceTap(p.id, p.target, tracer.capacity, recorder=host)
                self._parts[p.target].trace = (tracer, ttap)

    def rate_watch(self, notify: Callable[[dict[str, object]], None]) -> tracing.RateWatch | None:
        """The call-rate check of this process's traced stages (None: no limit is set)."""
        tracer = self.tracer
        if tracer is None or tracer.max_calls_per_s is None:
            return None
        return tracing.RateWatch(tracer, notify)

    def stage_probes(self, stage: str) -> StageProbes:
        """What ``stage``'s loop records: its state, its iterations, and the probe storage to
        settle when it ends."""
        parts = self._parts.get(stage, _StageParts())
        stores = tuple(dict.fromkeys(parts.storages))

        def settle() -> None:
            for store in stores:
                store.settle()

        bind = unbind = None
        if parts.trace is not None:
            tracer, ttap = parts.trace

            def bind() -> None:
                tracer.bind_tap(ttap)

            unbind = tracer.unbind
        if self.stacks is not None and parts.tracker is not None and parts.state_probe:
            bind, unbind = self._sampled(parts.tracker, parts.state_probe, bind, unbind)
        return StageProbes(
            parts.tracker,
            parts.iteration.get("iteration"),
            parts.iteration.get("input_wait"),
            parts.iteration.get("output_wait"),
            self.now,
            settle if stores else None,
            bind,
            unbind,
            self.report,
        )

    def _sampled(
        self, tracker: native.StateTracker, probe: int,
        bind: Callable[[], None] | None, unbind: Callable[[], None] | None,
    ) -> tuple[Callable[[], None], Callable[[], None]]:  # fmt: skip
        """``bind`` and ``unbind`` that also add the stage's thread to the stack sampler and
        let it go."""
        stacks = self.stacks
        assert stacks is not None

        def bound() -> None:
            if bind is not None:
                bind()
            stacks.add(tracker, probe)

        def unbound() -> None:
            if unbind is not None:
                unbind()
            stacks.remove(tracker)

        return bound, unbound


def start_threads(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    scope: ProcessShare,
    stages: list[str],
    on_error: Callable[[str, BaseException], None],
) -> list[threading.Thread]:
    threads = []
    loops: dict[str, list[tuple[Any, list[Channel], list[Channel], StageProbes]]] = {}
    for name in stages:
        spec = pipeline.stages[name]
        ins = [channels[c.name] for c in pipeline.inputs(name)]
        outs = [channels[c.name] for c in pipeline.outputs(name)]
        if kind_of(spec.resource).event_loop:  # a task of its resource's loop
            loops.setdefault(spec.resource.name, []).append(
                (spec, ins, outs, scope.stage_probes(name))
            )
            continue
        t = threading.Thread(
            target=run_stage,
            args=(spec, ins, outs, scope.stage_probes(name), on_error),
            name=f"stage-{name}",
            daemon=True,
        )
        threads.append(t)
    for t in threads:
        t.start()
    for loop_name, tasks in loops.items():
        threads.append(start_loop(loop_name, tasks, on_error))
    return threads


def start_links(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    stages: list[str],
    on_error: Callable[[str, BaseException], None],
) -> list[threading.Thread]:
    """Start this process's side of every link channel: the mover where the producer runs,
    the receiver where the consumer runs. Their errors are reported as the stage's."""
    mine = set(stages)
    threads = []
    for spec in pipeline.channels.values():
        ch = channels.get(spec.name)  # a host's worker holds only the channels it touches
        if not isinstance(ch, LinkChannel):
            continue
        for stage, body, role in (
            (spec.src, ch.mover, "mover"),
            (spec.dst, ch.receiver, "receiver"),
        ):
            if stage in mine:
                threads.append(
                    threading.Thread(
                        target=_link_thread,
                        args=(stage, body, on_error),
                        name=f"link-{role}-{spec.name}",
                        daemon=True,
                    )
                )
    for t in threads:
        t.start()
    return threads


def _link_thread(
    stage: str, body: Callable[[], None], on_error: Callable[[str, BaseException], None]
) -> None:
    try:
        body()
    except Aborted:
        pass
    except BaseException as exc:
        on_error(stage, exc)
