"""Running a pipeline: stage threads here, stage groups in forked child processes, one supervisor.

In: a ``Pipeline``, the probes to activate and a way to reach the monitor. Out: an ``Outcome``
(completed, failed with the stage and its error, or interrupted), with every probe flushed.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import queue
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from streamscope.core.clock import host_now_ticks
from streamscope.core.errors import describe_exception
from streamscope.core.process import die_with_parent
from streamscope.core.records import Kind
from streamscope.core.topology import ProbeInfo
from streamscope.pipeline.calibrator import EVERY_S, Calibrator
from streamscope.pipeline.channel import ThreadChannel, use_clock
from streamscope.pipeline.pipeline import Pipeline
from streamscope.pipeline.shm import ProcessChannel
from streamscope.pipeline.worker import Channel, run_stage
from streamscope.probes.agent import Agent
from streamscope.probes.taps import DEFAULT_CAPACITY, LockedTap, RingTap, StateTracker
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.timebase.roundtrip import clock_socketpair, serve_clock
from streamscope.transport.channels import UnixSocketTransport


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # completed | failed | interrupted
    error: str | None = None
    stage: str | None = None


def describe_error(exc: BaseException) -> str:
    """How a stage's exception is reported (see ``core.errors.describe_exception``)."""
    return describe_exception(exc)


class _Scope:
    """The channels, taps and trackers of one process."""

    def __init__(
        self,
        pipeline: Pipeline,
        channels: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        stages: list[str],
        capacity: int = DEFAULT_CAPACITY,
        now: Callable[[], int] = host_now_ticks,
    ) -> None:
        self.trackers: dict[str, StateTracker] = {}
        self.taps: list[LockedTap | RingTap] = []
        mine = set(stages)
        for p in probes:
            if p.kind == "state" and p.target in mine:
                tap = RingTap(p.id, Kind.STATE, capacity)
                self.taps.append(tap)
                self.trackers[p.target] = StateTracker(p.target, tap, now)
            elif p.kind in ("tail", "head"):
                spec = pipeline.channels[p.target]
                owner = spec.src if p.kind == "tail" else spec.dst
                if owner not in mine:
                    continue
                ch = channels[p.target]
                kind = Kind.PUT if p.kind == "tail" else Kind.GET
                if isinstance(ch, ThreadChannel):
                    locked = LockedTap(p.id, kind, ch.mutex, capacity)
                    setattr(ch, p.kind, locked)
                    self.taps.append(locked)
                else:
                    ring = RingTap(p.id, kind, capacity)
                    setattr(ch, p.kind, ring)
                    self.taps.append(ring)


def _start_threads(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    scope: _Scope,
    stages: list[str],
    on_error: Callable[[str, BaseException], None],
) -> list[threading.Thread]:
    threads = []
    for name in stages:
        spec = pipeline.stages[name]
        ins = [channels[c.name] for c in pipeline.inputs(name)]
        outs = [channels[c.name] for c in pipeline.outputs(name)]
        t = threading.Thread(
            target=run_stage,
            args=(spec, ins, outs, scope.trackers.get(name), on_error),
            name=f"stage-{name}",
            daemon=True,
        )
        threads.append(t)
    for t in threads:
        t.start()
    return threads


@dataclass(frozen=True, slots=True)
class _Child:
    """What a forked stage process needs besides the pipeline and its channels."""

    name: str
    stages: list[str]
    agent_id: int
    socket_path: str | None
    flush_interval_s: float
    tap_capacity: int
    clock: str = ""  # an emulated clock spec: this process has a clock domain of its own
    epoch_ns: int = 0
    parent_pid: int = 0


def _clock_main(name: str, spec: str, epoch_ns: int, sock: socket.socket, parent_pid: int) -> None:
    """A clock domain's counter, answering round trips in a process of its own: like a device's
    hardware counter, it answers at once however busy the domain's stages are (a thread beside
    them would wait for the interpreter lock, and widen every bound when they compute)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    die_with_parent(parent_pid)
    clock = EmulatedClock(EmulatedClockSpec.parse(spec), epoch_ns, domain=name)
    with contextlib.suppress(OSError):
        serve_clock(sock, clock)
    os._exit(0)


def _child_main(
    pipeline: Pipeline,
    channels: dict[str, Channel],
    probes: tuple[ProbeInfo, ...],
    spec: _Child,
    status: Any,
) -> None:
    """Entry point of a forked stage process. Never returns: exits with os._exit."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    die_with_parent(spec.parent_pid)
    agent: Agent | None = None
    code = 0
    try:
        now: Callable[[], int] = host_now_ticks
        domain = "host"
        if spec.clock:
            clock = EmulatedClock(
                EmulatedClockSpec.parse(spec.clock), spec.epoch_ns, domain=spec.name
            )
            now, domain = clock.now_ticks, spec.name
            use_clock(now)  # every tap of this process now reads the device's clock
        if spec.socket_path is not None:
            agent = Agent(
                spec.agent_id,
                UnixSocketTransport(spec.socket_path),
                now=now,
                flush_interval_s=spec.flush_interval_s,
                domain=domain,
            )
        scope = _Scope(pipeline, channels, probes, spec.stages, spec.tap_capacity, now)
        if agent is not None:
            for tap in scope.taps:
                agent.add(tap)

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

        signal.signal(signal.SIGTERM, on_term)
        errors: list[tuple[str, str]] = []

        def on_error(stage: str, exc: BaseException) -> None:
            errors.append((stage, describe_error(exc)))
            status.put(("error", stage, describe_error(exc)))

        threads = _start_threads(pipeline, channels, scope, spec.stages, on_error)
        if agent is not None:
            agent.start()
        while any(t.is_alive() for t in threads) and not errors:
            for t in threads:
                t.join(timeout=0.05)
        code = 1 if errors else 0
        if code == 0 and spec.clock:
            status.put(("done", spec.name, ""))  # the host takes the domain's last burst now
    except BaseException as exc:
        status.put(("error", spec.stages[0] if spec.stages else "?", describe_error(exc)))
        code = 1
    finally:
        if agent is not None:
            agent.close(final=code == 0)
        os._exit(code)


class Runner:
    """Runs one pipeline once. ``main_agent`` collects the main process's taps."""

    def __init__(
        self,
        pipeline: Pipeline,
        probes: tuple[ProbeInfo, ...],
        main_agent: Agent | None,
        socket_path: str | None,
        *,
        flush_interval_s: float = 0.05,
        tap_capacity: int = DEFAULT_CAPACITY,
        calibrate_every_s: float = EVERY_S,
    ) -> None:
        pipeline.validate()
        self.tap_capacity = tap_capacity
        self.calibrate_every_s = calibrate_every_s
        self.calibrator: Calibrator | None = None
        #: Every emulated clock counts from here (host monotonic ns); the monitor is not told.
        self.epoch_ns = host_now_ticks()
        self.pipeline = pipeline
        self.probes = probes
        self.agent = main_agent
        self.socket_path = socket_path
        self.flush_interval_s = flush_interval_s
        self._ctx = mp.get_context("fork")
        self._errors: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._status = self._ctx.SimpleQueue()
        self.channels: dict[str, Channel] = {}
        for ch in pipeline.channels.values():
            if pipeline.channel_transport(ch) == "thread":
                self.channels[ch.name] = ThreadChannel(ch.capacity, name=ch.name)
            else:
                self.channels[ch.name] = ProcessChannel(
                    ch.name, ch.capacity, self._ctx, ch.slot_bytes
                )
        self.children: list[Any] = []
        self.responders: list[Any] = []  # one clock-counter process per clock domain
        self._child_stages: list[list[str]] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        groups: dict[str, list[str]] = {}
        main: list[str] = []
        for spec in self.pipeline.stages.values():
            if spec.resource.in_main_process:
                main.append(spec.name)
            else:
                groups.setdefault(spec.resource.name, []).append(spec.name)
        resources = {s.resource.name: s.resource for s in self.pipeline.stages.values()}
        index = {r.name: i for i, r in enumerate(self.pipeline.topology().resources)}
        domains: list[tuple[int, str, socket.socket]] = []
        # Fork every child before this process starts any thread of its own.
        for i, (name, stages) in enumerate(groups.items(), start=1):
            res = resources[name]
            if res.clock:
                host_end, device_end = clock_socketpair()
                responder = self._ctx.Process(
                    target=_clock_main,
                    args=(name, res.clock, self.epoch_ns, device_end, os.getpid()),
                    name=f"streamscope-clock-{name}",
                    daemon=True,
                )
                responder.start()
                device_end.close()
                self.responders.append(responder)
                domains.append((index[name], name, host_end))
            child = _Child(
                name, stages, i, self.socket_path, self.flush_interval_s, self.tap_capacity,
                res.clock, self.epoch_ns, os.getpid(),
            )  # fmt: skip
            proc = self._ctx.Process(
                target=_child_main,
                args=(self.pipeline, self.channels, self.probes, child, self._status),
                name=f"streamscope-{name}",
                daemon=False,
            )
            proc.start()
            self.children.append(proc)
            self._child_stages.append(stages)
        if domains and self.agent is not None:
            self.calibrator = Calibrator(self.agent, domains, every_s=self.calibrate_every_s)
            self.calibrator.start()
        scope = _Scope(self.pipeline, self.channels, self.probes, main, self.tap_capacity)
        if self.agent is not None:
            for tap in scope.taps:
                self.agent.add(tap)
        self._threads = _start_threads(self.pipeline, self.channels, scope, main, self._on_error)
        if self.agent is not None:
            self.agent.start()

    def _on_error(self, stage: str, exc: BaseException) -> None:
        self._errors.put((stage, describe_error(exc)))

    def _failure(self) -> tuple[str, str] | None:
        if not self._errors.empty():
            return self._errors.get()
        reported = self._reported()
        if reported is not None:
            return reported
        for proc, stages in zip(self.children, self._child_stages, strict=True):
            if proc.exitcode not in (None, 0):
                # A child writes its error before it exits: read once more before guessing.
                reported = self._reported()
                if reported is not None:
                    return reported
                return (
                    stages[0],
                    f"its process ({', '.join(stages)}) exited with code {proc.exitcode}",
                )
        return None

    def _reported(self) -> tuple[str, str] | None:
        while not self._status.empty():
            msg = self._status.get()
            if msg[0] == "error":
                return (msg[1], msg[2])
            if msg[0] == "done" and self.calibrator is not None:
                self.calibrator.finish(msg[1])  # its last burst; then the process may exit
        return None

    def wait(self, poll_s: float = 0.02) -> Outcome:
        """Supervise until every stage has finished, one failed, or Ctrl-C."""
        try:
            while True:
                failure = self._failure()
                if failure is not None:
                    self.stop()
                    return Outcome(
                        "failed", f"stage {failure[0]!r} raised {failure[1]}", failure[0]
                    )
                if not any(t.is_alive() for t in self._threads) and all(
                    p.exitcode is not None for p in self.children
                ):
                    failure = self._failure()
                    if failure is not None:
                        return Outcome(
                            "failed", f"stage {failure[0]!r} raised {failure[1]}", failure[0]
                        )
                    self.stop_calibration()
                    return Outcome("completed")
                time.sleep(poll_s)
        except KeyboardInterrupt:
            self.stop()
            return Outcome("interrupted", "interrupted by the user (SIGINT)")

    def stop_calibration(self) -> None:
        if self.calibrator is not None:
            self.calibrator.stop()
        for proc in self.responders:
            proc.join(timeout=1.0)
            if proc.exitcode is None:
                proc.kill()
                proc.join(timeout=1.0)

    def stop(self) -> None:
        """Stop everything still running; no child process is left behind."""
        self.stop_calibration()
        for ch in self.channels.values():
            if isinstance(ch, ThreadChannel):
                ch.abort()
        for proc in self.children:
            if proc.exitcode is None:
                proc.terminate()
        deadline = time.monotonic() + 3.0
        for proc in self.children:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.exitcode is None:
                proc.kill()
                proc.join(timeout=1.0)
        for t in self._threads:
            t.join(timeout=0.5)
