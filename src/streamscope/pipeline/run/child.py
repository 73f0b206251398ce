"""Entry points of the processes a run forks (stage processes and clock-counter processes), and
of a cluster host's stages in their worker there.

In: the pipeline, its channels and probes, and what one child runs. Out: the child's stages
running with their own rings (and clock; a device also with its agent), a domain's counter
answering round trips, or a host's stages with the agent that drains and reduces all its rings.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from streamscope.agents.assignments import HostPair, LocalQueue, LocalState
from streamscope.agents.ship import Agent
from streamscope.core import native
from streamscope.core.errors import describe_exception
from streamscope.core.process import die_with_parent
from streamscope.core.topology import HOST, ProbeInfo
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.link import link_counts, save_links_truth
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.run.share import ProcessShare, start_links, start_threads
from streamscope.pipeline.run.worker import Channel, runner_report
from streamscope.probes.taps import Recorder, host_clock
from streamscope.probes.tracing import RateWatch
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.timebase.roundtrip import serve_clock
from streamscope.transport.channels import UnixSocketTransport
from streamscope.transport.control import Control

if TYPE_CHECKING:
    from streamscope.agents.device import FrameReducer


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """What a forked stage process needs besides the pipeline and its channels."""

    name: str
    stages: list[str]
    agent_id: int
    socket_path: str | None
    flush_interval_s: float
    tap_capacity: int
    ring_dir: str | None = None  #: where this process's rings go (None: nobody drains them)
    clock: str = ""  # an emulated clock spec: this process has a clock domain of its own
    epoch_ns: int = 0
    parent_pid: int = 0
    local: tuple[LocalQueue, ...] = ()  #: sub-queues this device reduces itself
    truth_dir: str | None = None  #: where to leave ground truth (validation runs only)
    states: tuple[LocalState, ...] = ()  #: stages whose states this host reduces itself
    frames: tuple[HostPair, ...] = ()  #: (query, target) pairs this host reduces itself
    shipped: frozenset[int] | None = None  #: a host's probes the monitor reads (None: all)


def clock_main(
    name: str, spec: str, epoch_ns: int, sock: socket.socket, parent_pid: int, rtl: str = ""
) -> None:
    """A clock domain's counter, answering round trips in a process of its own: like a device's
    hardware counter, it answers at once however busy the domain's stages are (a thread beside
    them would wait for the interpreter lock, and widen every bound when they compute). ``rtl``:
    the answers come from the timestamp core, simulated by it, kept at the clock's pace."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    clock: Any = EmulatedClock(EmulatedClockSpec.parse(spec), epoch_ns, domain=name)
    if rtl:
        from streamscope.hw.rtl import RtlClock

        clock = RtlClock(clock, sim=rtl)
    with contextlib.suppress(OSError):
        serve_clock(sock, clock)
    os._exit(0)


def child_main(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    probes: tuple[ProbeInfo, ...],
    spec: ChildSpec,
    status: Any,
    grid: Any = None,
) -> None:
    """Entry point of a forked stage process. Never returns: exits with os._exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    die_with_parent(spec.parent_pid)
    agent: Agent | None = None
    control: Control | None = None
    code = 0
    try:
        clock, domain, tick_ns = _process_clock(spec)
        if spec.socket_path is not None:
            control = Control(UnixSocketTransport(spec.socket_path), spec.agent_id)
        scope = ProcessShare(
            pipeline, channels, probes, spec.stages,
            Recorder(spec.ring_dir, clock, spec.tap_capacity), _local_probes(spec),
            runner_report(control),
        )  # fmt: skip
        if control is not None and (spec.local or scope.holders):
            agent = _local_agent(control, clock, domain, tick_ns, spec, grid, scope, pipeline)
        rates = scope.rate_watch(control.note) if control is not None else None
        signal.signal(signal.SIGTERM, _terminator(agent))
        code = _run_stages(pipeline, channels, scope, spec.stages, status, agent, rates)
        if code == 0 and spec.truth_dir is not None:
            save_links_truth(pipeline.channels.values(), channels, spec.stages, spec.truth_dir)
        if code == 0 and spec.clock:
            status.put(("done", spec.name, ""))  # the host takes the domain's last burst now
    except BaseException as exc:
        status.put(("error", spec.stages[0] if spec.stages else "?", describe_exception(exc)))
        code = 1
    finally:
        if agent is not None:
            agent.close(final=code == 0)
            if control is not None and agent.cores:
                # (final: they finished as the agent closed)
                control.note({"cores": {k: c.stats for k, c in agent.cores.items()}})
        if control is not None:
            control.close()
        os._exit(code)


class _Errors:
    """Where a host's stage threads report their errors (the worker returns the first)."""

    def __init__(self) -> None:
        self.first: tuple[str, str] | None = None

    def put(self, msg: tuple[str, str, str]) -> None:
        if msg[0] == "error" and self.first is None:
            self.first = (msg[1], msg[2])


def host_main(
    pipeline: Pipeline,
    links: dict[str, Channel],
    probes: tuple[ProbeInfo, ...],
    spec: ChildSpec,
    control: Control,
    grid: Any = None,
    frames: FrameReducer | None = None,
) -> tuple[str, str] | None:
    """A cluster host's stages, in its worker on that host: None once every one has ended, or
    the first that failed and its error. Nothing is published for a monitor to drain: every
    ring is private, and the host's agent ships them over ``control`` (its own sub-queues
    reduced to frame summaries first). ``links``: the channels from or to other hosts; those
    between two of these stages are made here; ``frames``: the pairs it reduces to frames
    itself (``spec.frames``)."""
    clock, domain, tick_ns = _process_clock(spec)
    mine = set(spec.stages)
    channels = dict(links)
    for c in pipeline.channels.values():
        if c.src in mine and c.dst in mine:
            channels[c.name] = ThreadChannel(c.capacity, name=c.name)
    recorder = Recorder(None, clock, spec.tap_capacity)
    scope = ProcessShare(
        pipeline, channels, probes, spec.stages, recorder, _local_probes(spec),
        runner_report(control),
    )  # fmt: skip
    local = None
    if spec.local or spec.states or frames is not None or spec.shipped is not None:
        from streamscope.agents.device import LocalReduction

        local = LocalReduction(spec.local, tick_ns, grid, spec.states, frames, spec.shipped)
    agent = Agent(
        control, clock.now, flush_interval_s=spec.flush_interval_s, domain=domain, local=local
    )
    for tap in recorder.taps:
        agent.add(tap)
    errors = _Errors()
    code = 1
    try:
        code = _run_stages(pipeline, channels, scope, spec.stages, errors, agent, None)
        control.note(
            {
                "links": link_counts(pipeline.channels.values(), channels, spec.stages),
                "hosts": {spec.name: {"kept_records": local.kept if local else 0}},
                "probe_events": dict(local.kept_by_probe) if local else {},
            }
        )
        if code == 0 and spec.truth_dir is not None:
            save_links_truth(pipeline.channels.values(), channels, spec.stages, spec.truth_dir)
    except BaseException as exc:
        errors.put(("error", spec.stages[0], describe_exception(exc)))
    finally:
        agent.close(final=code == 0)
    return errors.first


def _process_clock(spec: ChildSpec) -> tuple[native.Clock, str, float]:
    """The clock every ring of this process reads (a device's own, where it has one), its
    domain and its tick (ns)."""
    if not spec.clock:
        return host_clock(), HOST, 1.0
    emulated = EmulatedClock(EmulatedClockSpec.parse(spec.clock), spec.epoch_ns, domain=spec.name)
    return emulated.native_clock(), spec.name, emulated.tick_period_ns


def _local_probes(spec: ChildSpec) -> frozenset[int]:
    """The sub-queues this device reduces itself, and its watched producer's states: they stay
    in private rings its agent drains; every other ring is the monitor's."""
    return frozenset(
        p for q in spec.local for p in (q.insert_probe, q.remove_probe, q.state_probe) if p
    ) | {st.probe for st in spec.states}


def _local_agent(
    control: Control,
    clock: native.Clock,
    domain: str,
    tick_ns: float,
    spec: ChildSpec,
    grid: Any,
    scope: ProcessShare,
    pipeline: Pipeline,
) -> Agent:
    """The agent that reduces this device's own sub-queues, on the host's frame grid, and sends
    its private rings (an RTL device's storage cores: held back to their unread samples)."""
    from streamscope.agents.device import LocalReduction

    local = None
    if spec.local:
        rtls = (pipeline.stages[s].resource.rtl for s in spec.stages)
        rtl = next((r for r in rtls if r), "")
        local = LocalReduction(spec.local, tick_ns, grid, reducer=_core_reducer(pipeline, rtl))
    agent = Agent(
        control, clock.now, flush_interval_s=spec.flush_interval_s, domain=domain, local=local
    )
    for tap in scope.local_taps:
        agent.add(tap)
    for oldest in scope.holders:
        agent.hold(oldest)
    if local is not None:
        # What the RTL device's cores did, by ``resource/core`` (``monitor.endtables``).
        by_key = {q.key: q.channel for q in spec.local}
        agent.cores = {
            f"{spec.name}/channel {by_key[key]}": fr
            for key, fr in local.frames.items()
            if hasattr(fr, "stats")
        }
    return agent


def _core_reducer(pipeline: Pipeline, rtl: str) -> Callable[[LocalQueue, float], Any] | None:
    """On an RTL device, a sub-queue's reducer: the channel monitor core, simulated by
    ``rtl``, with a level for every item its buffer holds (None: the host's reducer)."""
    if not rtl:
        return None
    from streamscope.aggregate.subqueue import PROFILE_BINS
    from streamscope.hw.subqueue import CoreSubQueue

    def make(q: LocalQueue, tick_ns: float) -> Any:
        capacity = pipeline.channels[q.channel].capacity
        return CoreSubQueue(tick_ns, states=q.state_probe != 0, profile=PROFILE_BINS,
                            levels=capacity + 2, sim=rtl)  # fmt: skip

    return make


def _terminator(agent: Agent | None) -> Callable[[int, object], None]:
    """The SIGTERM handler: the agent closed (its last records not sent), then exit."""
    closing = False

    def on_term(signum: int, frame: object) -> None:
        # PR_SET_PDEATHSIG fires again for each exiting thread of a killed parent: a nested
        # call would deadlock on the agent's lock held by the first one.
        nonlocal closing
        if closing:
            return
        closing = True
        if agent is not None:
            agent.close(final=False)
        os._exit(128 + signum)

    return on_term


def _run_stages(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    scope: ProcessShare,
    stages: list[str],
    status: Any,
    agent: Agent | None,
    rates: RateWatch | None,
) -> int:
    """Run this process's stages until each has ended (0) or one failed (1, reported)."""
    errors: list[tuple[str, str]] = []

    def on_error(stage: str, exc: BaseException) -> None:
        # Report before the main thread can see the error and exit: os._exit would cut a
        # put that is still writing, and the host would only see an exit code.
        message = describe_exception(exc)
        status.put(("error", stage, message))
        errors.append((stage, message))

    threads = start_threads(pipeline, channels, scope, stages, on_error)
    threads += start_links(pipeline, channels, stages, on_error)
    if agent is not None:
        agent.start()
    if rates is not None:
        rates.start()
    while any(t.is_alive() for t in threads) and not errors:
        for t in threads:
            t.join(timeout=0.05)
    if rates is not None:
        rates.stop()
    return 1 if errors else 0
