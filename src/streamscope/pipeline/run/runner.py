"""Running a pipeline: stage threads here, stage groups in forked child processes, one supervisor.

In: a ``Pipeline``, the probes to activate and a way to reach the monitor. Out: an ``Outcome``
(completed, failed with the stage and its error, or interrupted), with every probe flushed.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.context import BaseContext
from typing import TYPE_CHECKING, Any

from streamscope.agents.assignments import HostPair, local_queues, local_states
from streamscope.core.clock import host_now_ticks
from streamscope.core.errors import PipelineError, describe_exception
from streamscope.core.process import interruption, machine_busy_ns
from streamscope.core.topology import HOST, ProbeInfo, Topology
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.link import LinkChannel, link_counts, save_links_truth
from streamscope.pipeline.channels.shm import ProcessChannel
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.describe.resources import Resource
from streamscope.pipeline.kinds import RunsIn, kind_of
from streamscope.pipeline.run.calibrator import EVERY_S, Calibrator, ClockLink
from streamscope.pipeline.run.child import ChildSpec, child_main, clock_main
from streamscope.pipeline.run.remote import RemoteHosts
from streamscope.pipeline.run.share import ProcessShare, start_links, start_threads
from streamscope.pipeline.run.worker import Channel, runner_report
from streamscope.probes.taps import DEFAULT_CAPACITY, Recorder
from streamscope.probes.tracing import RateWatch
from streamscope.timebase.emulated import CLOCK_TRUTH
from streamscope.timebase.roundtrip import clock_socketpair
from streamscope.transport.control import Control
from streamscope.transport.wire import MsgType

if TYPE_CHECKING:
    from streamscope.timebase.burst import Exchanges


@dataclass(frozen=True, slots=True)
class Outcome:
    status: str  # completed | failed | interrupted
    error: str | None = None
    stage: str | None = None


def describe_error(exc: BaseException) -> str:
    """How a stage's exception is reported (see ``core.errors.describe_exception``)."""
    return describe_exception(exc)


class Runner:
    """Runs one pipeline once. Every process's rings go into ``ring_dir`` (None: private rings
    nobody drains); ``control`` is this process's link to the monitor (None: no monitor)."""

    def __init__(
        self,
        pipeline: Pipeline,
        probes: tuple[ProbeInfo, ...],
        control: Control | None,
        socket_path: str | None,
        *,
        ring_dir: str | None = None,
        flush_interval_s: float = 0.05,
        tap_capacity: int = DEFAULT_CAPACITY,
        calibrate_every_s: float = EVERY_S,
        t0_ticks: int = 0,
        ground_truth_dir: str | None = None,
        vq_frames: dict[str, int] | None = None,
        raw_channels: frozenset[str] | None = frozenset(),
        remote: RemoteHosts | None = None,
        state_frames: dict[str, int] | None = None,
        host_frames: dict[str, tuple[HostPair, ...]] | None = None,
        shipped: frozenset[int] | None = None,
    ) -> None:
        pipeline.validate()
        if pipeline.hosts() and remote is None:
            raise PipelineError(
                f"pipeline {pipeline.name!r} places stages on hosts "
                f"({', '.join(pipeline.hosts())}): it needs a cluster to run on"
            )
        #: The cluster the hosts' stages run on (None: no hosts).
        self.remote = remote
        self.tap_capacity = tap_capacity
        self.calibrate_every_s = calibrate_every_s
        self.calibrator: Calibrator | None = None
        #: Every emulated clock counts from here (host monotonic ns); the monitor is not told.
        self.epoch_ns = host_now_ticks()
        self.pipeline = pipeline
        self.probes = probes
        self.control = control
        self.socket_path = socket_path
        self.ring_dir = ring_dir
        self._rates: RateWatch | None = None
        self.flush_interval_s = flush_interval_s
        self._ctx = mp.get_context("fork")
        self._errors: queue.SimpleQueue[tuple[str, str]] = queue.SimpleQueue()
        self._status = self._ctx.SimpleQueue()
        #: Device frames are reduced on the device, on the host's frame grid mapped to its ticks.
        self.t0_ticks = t0_ticks
        self.truth_dir = ground_truth_dir
        self.local = local_queues(pipeline.topology(probes), vq_frames or {}, raw_channels)
        #: Per host, the stages whose states its agent reduces to frames (``state_frames``:
        #: stage -> frame, ``Plan.summarized_states``).
        self.states = local_states(pipeline.topology(probes), state_frames or {})
        #: Per host, the (query, target) pairs its agent reduces to frames itself, and the
        #: probes whose records the monitor reads all the same.
        self.host_frames = host_frames or {}
        self.shipped = shipped
        #: Per clock domain, the hosts that pair items stamped in it (a link's latency reduced
        #: at its consumer's host): they get its frame grids too.
        self._followers: dict[str, set[str]] = {}
        #: device or host name -> where its frame grids go (a pipe's end; a host's worker)
        self._grids: dict[str, Any] = {}
        self._first_burst: dict[str, Exchanges] = {}
        self.channels = make_channels(pipeline, self._ctx, ground_truth_dir is not None, remote)
        self._stamp_links(pipeline.topology(probes))
        self.children: list[Any] = []
        self.responders: list[Any] = []  # one clock-counter process per clock domain
        self._child_stages: list[list[str]] = []
        self._host_failure: Outcome | None = None
        self._main_stages: list[str] = []
        self._threads: list[threading.Thread] = []

    def start(self) -> None:
        self._machine0 = machine_busy_ns(), time.monotonic_ns()
        main, groups = self._groups()
        resources = {s.resource.name: s.resource for s in self.pipeline.stages.values()}
        index = {r.name: i for i, r in enumerate(self.pipeline.topology().resources)}
        self._save_clock_truth(resources)
        domains: list[tuple[int, str, socket.socket | ClockLink]] = []
        self._announce_agents(groups, resources)
        # Fork every child before this process starts any thread of its own.
        for i, (name, stages) in enumerate(groups.items(), start=1):
            res = resources[name]
            if kind_of(res).runs_in is RunsIn.CLUSTER:
                continue  # started through the cluster, below
            if res.clock:
                domains.append((index[name], name, self._start_clock(name, res.clock, res.rtl)))
            self._fork(i, name, stages, res)
        for i, (name, stages) in enumerate(groups.items(), start=1):
            res = resources[name]
            if kind_of(res).runs_in is RunsIn.CLUSTER and self.remote is not None:
                domains.append((index[name], name, self.remote.clock(name, res.clock,
                                                                     self.epoch_ns)))  # fmt: skip
                self._start_host(i, name, stages, res, self.remote)
        for host in self._followers.get(HOST, ()):
            self._grids[host].send((float(self.t0_ticks), 1.0, HOST))  # this process's clock
        if domains and self.control is not None:
            self.calibrator = Calibrator(
                self.control, domains, every_s=self.calibrate_every_s, on_burst=self._send_grid
            )
            self.calibrator.start()
        self._start_main(main)

    def _announce_agents(
        self, groups: dict[str, list[str]], resources: dict[str, Resource]
    ) -> None:
        """Tell the monitor, before any child starts, which children's agents will send it
        data (a device that reduces its own sub-queues; an RTL device's storage cores): frames
        wait for them from the start, not from when their first message comes, which may be
        after the monitor has passed the first records they send."""
        if self.control is None:
            return
        sampled = {
            self.pipeline.probes[p.target].stage
            for p in self.probes
            if p.kind == "sampler" and p.target in self.pipeline.probes
        }
        ids = [
            i
            for i, (name, stages) in enumerate(groups.items(), start=1)
            if kind_of(resources[name]).sends_data(
                bool(self.local.get(name)), bool(sampled & set(stages))
            )
        ]
        if ids:
            self.control.send(MsgType.NOTE, self.t0_ticks, info={"data_agents": ids})

    def _groups(self) -> tuple[list[str], dict[str, list[str]]]:
        """The stages this process runs, and those of each child process, by resource."""
        groups: dict[str, list[str]] = {}
        main: list[str] = []
        for spec in self.pipeline.stages.values():
            if spec.resource.in_main_process:
                main.append(spec.name)
            else:
                groups.setdefault(spec.resource.name, []).append(spec.name)
        return main, groups

    def _start_clock(self, name: str, clock: str, rtl: str = "") -> socket.socket:
        """The clock domain ``name``'s counter, in a process of its own (``rtl``: the simulated
        timestamp core): the host end of the socket it answers round trips on."""
        host_end, device_end = clock_socketpair()
        responder = self._ctx.Process(
            target=clock_main,
            args=(name, clock, self.epoch_ns, device_end, os.getpid(), rtl),
            name=f"streamscope-clock-{name}",
            daemon=True,
        )
        responder.start()
        device_end.close()
        self.responders.append(responder)
        return host_end

    def _fork(self, i: int, name: str, stages: list[str], res: Resource) -> None:
        """The child process (agent ``i``) that runs ``stages``, the stages of resource
        ``name`` (a device's gets the host's frame grid through a pipe)."""
        grid_end = None
        if kind_of(res).frame_grid:
            grid_end, self._grids[name] = self._ctx.Pipe(duplex=False)
        child = ChildSpec(
            name, stages, i, self.socket_path, self.flush_interval_s, self.tap_capacity,
            self.ring_dir, res.clock, self.epoch_ns, os.getpid(), self.local.get(name, ()),
            self.truth_dir,
        )  # fmt: skip
        proc = self._ctx.Process(
            target=child_main,
            args=(self.pipeline, self.channels, self.probes, child, self._status, grid_end),
            name=f"streamscope-{name}",
            daemon=False,
        )
        proc.start()
        if grid_end is not None:
            grid_end.close()
        self.children.append(proc)
        self._child_stages.append(stages)

    def _start_host(
        self, i: int, name: str, stages: list[str], res: Resource, remote: RemoteHosts
    ) -> None:
        """Host ``name``'s stages, in its worker on that host (agent ``i``); it is handed the
        channels that leave or reach it, and makes those between its own stages."""
        mine = set(stages)
        links = {
            c.name: self.channels[c.name]
            for c in self.pipeline.channels.values()
            if (c.src in mine) != (c.dst in mine)
        }
        spec = ChildSpec(
            name, stages, i, None, self.flush_interval_s, self.tap_capacity, None, res.clock,
            self.epoch_ns, 0, self.local.get(name, ()), self.truth_dir, self.states.get(name, ()),
            self.host_frames.get(name, ()), self.shipped,
        )  # fmt: skip
        remote.start(name, self.pipeline, links, self.probes, spec)
        self._grids[name] = _HostGrid(remote, name)

    def _stamp_links(self, topology: Topology) -> None:
        """The links whose latency their consumer's host reduces carry their items' insertion
        ticks; that host follows the producer's clock domain."""
        domain = topology.stage_domains()
        ends = {c.name: (c.src, c.dst) for c in topology.channels}
        for host, pairs in self.host_frames.items():
            for pair in pairs:
                if pair.metric == "latency" and pair.target in topology.link_names:
                    self.channels[pair.target].stamp()  # type: ignore[union-attr]
                    src = ends[pair.target][0]
                    self._followers.setdefault(domain.get(src, HOST), set()).add(host)

    def _start_main(self, main: list[str]) -> None:
        """This process's stages, in threads of their own."""
        recorder = Recorder(self.ring_dir, capacity=self.tap_capacity)
        scope = ProcessShare(
            self.pipeline, self.channels, self.probes, main, recorder,
            report=runner_report(self.control),
        )  # fmt: skip
        self._main_stages = main
        self._threads = start_threads(self.pipeline, self.channels, scope, main, self._on_error)
        self._threads += start_links(self.pipeline, self.channels, main, self._on_error)
        if self.control is not None:
            self._rates = scope.rate_watch(self.control.note)
            if self._rates is not None:
                self._rates.start()

    def _send_grid(self, name: str, ex: Exchanges) -> None:
        """After each burst of a device: the run's start in its ticks and its ticks per ns, so
        that it can reduce its records on the host's frames. The first burst alone fixes the
        rate poorly (it spans milliseconds); later ones are fitted together with it, and the
        device moves its grid on from the frames it has not closed yet. The monitor reports
        the alignment achieved either way."""
        conn = self._grids.get(name)
        if conn is None:
            return
        import numpy as np

        from streamscope.timebase.burst import CalibrationError, Exchanges, fit

        first = self._first_burst.setdefault(name, ex)
        both = ex if first is ex else Exchanges(
            t1_ns=np.concatenate((first.t1_ns, ex.t1_ns)),
            t2_ticks=np.concatenate((first.t2_ticks, ex.t2_ticks)),
            t3_ns=np.concatenate((first.t3_ns, ex.t3_ns)),
        )  # fmt: skip
        try:
            f = fit(both)
            origin = f.x0_ticks + (self.t0_ticks - f.b_ns) / f.s_ns_per_tick
            conn.send((origin, 1.0 / f.s_ns_per_tick))
            for host in self._followers.get(name, ()):
                self._grids[host].send((origin, 1.0 / f.s_ns_per_tick, name))
        except (CalibrationError, OSError, ValueError, ZeroDivisionError):
            pass  # the device keeps its last grid (or, with none, its records: see local.py)

    def _save_clock_truth(self, resources: dict[str, Any]) -> None:
        """Validation runs only: each emulated clock's spec and epoch, for the run file's
        ``clock_truth`` table (what a test holds cross-clock figures to; the monitor never
        reads it while it estimates)."""
        if self.truth_dir is None:
            return
        clocks = {
            name: {"spec": str(res.clock), "epoch_host_ns": self.epoch_ns}
            for name, res in resources.items()
            if res.clock
        }
        with open(os.path.join(self.truth_dir, CLOCK_TRUTH), "w", encoding="utf-8") as f:
            json.dump(clocks, f)

    _machine0: tuple[int, int] = (-1, 0)

    def note_links(self) -> None:
        """The main process's side of its links to hosts, and what each host's agent sent
        the monitor (its stages are done, or the run stops)."""
        if self.control is None:
            return
        counts = link_counts(self.pipeline.channels.values(), self.channels, self._main_stages)
        hosts = self.remote.traffic() if self.remote is not None else {}
        if counts or hosts:
            self.control.note({"links": counts, "hosts": hosts})
        busy0, wall0 = self._machine0
        busy = machine_busy_ns()
        if busy0 >= 0 and busy >= busy0:
            self.control.note({"machines": {"main": {
                "busy_ns": busy - busy0, "wall_ns": time.monotonic_ns() - wall0,
            }}})  # fmt: skip

    def save_truth(self) -> None:
        """The main process's side of the ground truth (its stages are done)."""
        if self.truth_dir is None:
            return
        save_links_truth(
            self.pipeline.channels.values(), self.channels, self._main_stages, self.truth_dir
        )

    def _on_error(self, stage: str, exc: BaseException) -> None:
        self._errors.put((stage, describe_error(exc)))

    def _hosts_ended(self) -> None:
        """Take the hosts whose stages ended: a last calibration burst for each that finished,
        the first failure kept."""
        if self.remote is None:
            return
        for end in self.remote.poll():
            if end.error is None:
                if self.calibrator is not None:
                    self.calibrator.finish(end.host)
            elif self._host_failure is None:
                text = end.error if end.lost else f"stage {end.stage!r} raised {end.error}"
                self._host_failure = Outcome("failed", text, end.stage)

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

    def wait(
        self,
        poll_s: float = 0.02,
        should_stop: Callable[[], str | None] | None = None,
        timeout_s: float | None = None,
    ) -> Outcome:
        """Supervise until every stage has finished, one failed, Ctrl-C, ``should_stop`` gives
        a reason to stop (the monitor can no longer record the run), or ``timeout_s`` passed
        (the run is then interrupted, saying so)."""
        deadline = time.monotonic() + timeout_s if timeout_s is not None else None
        try:
            while True:
                why = should_stop() if should_stop is not None else None
                if why is not None:
                    self.stop()
                    return Outcome("failed", why)
                if deadline is not None and time.monotonic() >= deadline:
                    self.stop()
                    return Outcome(
                        "interrupted", f"stopped after its time limit of {timeout_s:g} s"
                    )
                failure = self._failure()
                if failure is not None:
                    self.stop()
                    return Outcome(
                        "failed", f"stage {failure[0]!r} raised {failure[1]}", failure[0]
                    )
                self._hosts_ended()
                if self._host_failure is not None:
                    self.stop()
                    return self._host_failure
                if (
                    not any(t.is_alive() for t in self._threads)
                    and all(p.exitcode is not None for p in self.children)
                    and not (self.remote is not None and self.remote.running())
                ):
                    failure = self._failure()
                    if failure is not None:
                        return Outcome(
                            "failed", f"stage {failure[0]!r} raised {failure[1]}", failure[0]
                        )
                    self.stop_calibration()
                    self.save_truth()
                    self.note_links()
                    if self.remote is not None:
                        self.remote.stop()
                    return Outcome("completed")
                time.sleep(poll_s)
        except KeyboardInterrupt as exc:
            self.stop()
            return Outcome("interrupted", interruption(exc))

    def stop_calibration(self) -> None:
        if self._rates is not None:
            self._rates.stop()
            self._rates = None
        if self.calibrator is not None:
            self.calibrator.stop()
        for conn in self._grids.values():
            conn.close()
        self._grids.clear()
        for proc in self.responders:
            proc.join(timeout=1.0)
            if proc.exitcode is None:
                proc.kill()
                proc.join(timeout=1.0)

    def stop(self) -> None:
        """Stop everything still running; no child process is left behind. Every clock
        domain still answering gets a last burst first (what it sent can be placed)."""
        if self.calibrator is not None:
            self.calibrator.finish_all()
        if self.remote is not None and self.control is not None:
            self.control.note({"hosts": self.remote.traffic()})
        self.stop_calibration()
        for ch in self.channels.values():
            if isinstance(ch, ThreadChannel | LinkChannel):
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
        if self.remote is not None:
            self.remote.stop()
        for t in self._threads:
            t.join(timeout=0.5)


class _HostGrid:
    """Where a host's frame grids go: its worker (``send`` like a pipe's end)."""

    def __init__(self, remote: RemoteHosts, host: str) -> None:
        self.remote = remote
        self.host = host

    def send(self, grid: tuple[Any, ...]) -> None:
        """(origin, ticks per ns) of the host's own clock, or of another domain's, named third
        (a producer whose items it pairs)."""
        self.remote.send_grid(self.host, *grid)

    def close(self) -> None:
        pass


def make_channels(
    pipeline: Pipeline, ctx: BaseContext, ground_truth: bool, remote: RemoteHosts | None = None
) -> dict[str, Channel]:
    """Every channel of ``pipeline``, made before any process is forked: a native FIFO where
    both ends share a process (made on the host itself, for a host's), a link across a device
    boundary (keeping its ground truth in a validation run) or between hosts, else a
    shared-memory channel."""
    channels: dict[str, Channel] = {}
    for ch in pipeline.channels.values():
        link = pipeline.link_of(ch)
        src, dst = pipeline.stages[ch.src].resource, pipeline.stages[ch.dst].resource
        src_cluster = kind_of(src).runs_in is RunsIn.CLUSTER
        dst_cluster = kind_of(dst).runs_in is RunsIn.CLUSTER
        if pipeline.channel_transport(ch) == "thread":
            if not src_cluster:
                channels[ch.name] = ThreadChannel(ch.capacity, name=ch.name)
        elif link is not None and remote is not None and (src_cluster or dst_cluster):
            consumer = dst.name if dst_cluster else None
            channels[ch.name] = remote.link(
                ch.name, ch.capacity, link, consumer, ch.slot_bytes, ground_truth
            )
        elif link is not None:
            channels[ch.name] = LinkChannel(
                ch.name, ch.capacity, ctx, link, ch.slot_bytes, ground_truth=ground_truth
            )
        else:
            channels[ch.name] = ProcessChannel(ch.name, ch.capacity, ctx, ch.slot_bytes)
    return channels
