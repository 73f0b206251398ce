"""One monitored run, end to end: compile queries, start the monitor, run, finish the file.

In: a ``Pipeline``, queries and options. Out: a ``RunResult`` (status, error, path) and a run file
(or an in-memory store) holding every frame — whatever way the run ends.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.clock import host_now_ticks
from streamscope.core.errors import ConfigError, StreamscopeError
from streamscope.core.topology import Topology
from streamscope.monitor.functrace import TracingSession
from streamscope.monitor.service import MAIN_AGENT, InlineMonitor, MonitorService
from streamscope.pipeline.pipeline import Pipeline, plan_probes
from streamscope.pipeline.runner import Outcome, Runner
from streamscope.probes import tracing
from streamscope.probes.agent import DEFAULT_FLUSH_INTERVAL_S, Agent
from streamscope.probes.taps import DEFAULT_CAPACITY
from streamscope.query.ast import Query
from streamscope.query.compile import Plan, compile_queries
from streamscope.store.writer import DuckDBStore, InMemoryStore, RunMeta, RunStore
from streamscope.transport.channels import InMemoryTransport, Transport, UnixSocketTransport
from streamscope.transport.wire import MsgType

FramesCallback = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]
VERSION = "0.1.0"


@dataclass(frozen=True, slots=True)
class RunOptions:
    frame_ns: int = 1_000_000_000
    out: Path | None = None
    overwrite: bool = False
    mode: str = "process"  # process: a dedicated monitor process; inline: a thread here
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    #: Records each tap buffer holds between two flushes (a power of two); more are refused.
    tap_capacity: int = DEFAULT_CAPACITY
    #: Seconds between short calibration bursts of each clock domain (0: start and end only).
    calibrate_every_s: float = 2.0
    #: How each burst is fitted: hull (robust, tick-aware) or timetrial (seed 000).
    clock_method: str = "hull"
    #: Validation only: record the true insertion and removal time of every item of each link
    #: channel, and report each virtual queue's distance to its true occupancy (the estimate
    #: never reads them).
    ground_truth: bool = False
    #: Ship a device's raw records of its link buffers to the monitor too (normally only
    #: per-frame summaries cross the link, unless another query needs the records).
    device_trace: bool = False
    #: Keep every probe record in the run file (table ``record``), not only per-frame results:
    #: what ``streamscope export`` turns into state slices and events on a timeline. Implies
    #: ``device_trace``.
    trace: bool = False
    app: str = ""
    argv: tuple[str, ...] = ()
    command: str = ""


@dataclass(slots=True)
class RunResult:
    status: str
    error: str | None
    path: Path | None
    store: RunStore | None = None
    stage: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "failed": 1, "interrupted": 130}.get(self.status, 1)


def prepare(
    pipeline: Pipeline, queries: Sequence[Query | str], frame_ns: int
) -> tuple[Plan, Topology]:
    """Validate everything before anything runs: the pipeline, then every query against it."""
    pipeline.validate()
    plan = compile_queries(list(queries), pipeline.topology(), frame_ns)
    taps = plan.taps | {("trace", s) for s in pipeline.traced_stages()}
    topology = pipeline.topology(plan_probes(pipeline.topology(), taps))
    vq_frames(plan, topology)
    return plan, topology


def vq_frames(plan: Plan, topology: Topology) -> dict[str, int]:
    """Link channel -> the frame of its occupancy queries (a device reduces on one grid)."""
    links = {c.name for c in topology.channels if c.is_link}
    out: dict[str, int] = {}
    for q in plan.queries:
        if q.metric != "occupancy":
            continue
        for t in q.targets:
            if t.name in links and out.setdefault(t.name, q.frame_ns) != q.frame_ns:
                raise ConfigError(
                    f"query {q.text!r}: every occupancy query on the link channel "
                    f"{t.name!r} must use the same frame (the device reduces its buffer on "
                    f"one frame grid); found {out[t.name]} ns and {q.frame_ns} ns"
                )
    return out


def raw_channels(plan: Plan, topology: Topology, trace: bool) -> frozenset[str] | None:
    """Link channels whose device-side records must cross raw: all with ``trace``, else those
    that a query other than occupancy measures directly."""
    if trace:
        return None
    links = {c.name for c in topology.channels if c.is_link}
    return frozenset(
        t.name for q in plan.queries for t in q.targets
        if t.name in links and q.metric != "occupancy"
    )  # fmt: skip


def _meta(pipeline: Pipeline, opts: RunOptions) -> RunMeta:
    return RunMeta(
        run_id=uuid.uuid4().hex,
        name=pipeline.name,
        app=opts.app,
        command=opts.command,
        argv=opts.argv,
        host=socket.gethostname(),
        started_unix_ns=time.time_ns(),
        frame_ns=opts.frame_ns,
        version=VERSION,
    )


def _check_out(out: Path | None, overwrite: bool) -> None:
    if out is None:
        return
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists already; choose another --out or pass --overwrite")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"cannot write {out}: directory {parent} is not writable")


def run(
    pipeline: Pipeline,
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: FramesCallback | None = None,
) -> RunResult:
    """Monitor one run of ``pipeline``. Invalid input raises before anything runs."""
    opts = options or RunOptions()
    plan, topology = prepare(pipeline, queries, opts.frame_ns)
    _check_out(opts.out, opts.overwrite)
    meta = _meta(pipeline, opts)
    tmp = tempfile.mkdtemp(prefix="streamscope-")
    sock_path = os.path.join(tmp, "monitor.sock")
    traced = TracingSession(pipeline) if pipeline.tracing is not None else None
    if traced is not None:
        topology = traced.topology(topology)
    try:
        if opts.mode == "inline":
            return _run_inline(pipeline, plan, topology, meta, opts, sock_path, on_frames)
        if opts.mode == "process":
            return _run_process(pipeline, plan, topology, meta, opts, sock_path, on_frames)
        raise ConfigError(f"unknown monitor mode {opts.mode!r}; valid: process, inline")
    finally:
        if traced is not None:
            traced.close()
        shutil.rmtree(tmp, ignore_errors=True)


def _drive(
    pipeline: Pipeline,
    plan: Plan,
    topology: Topology,
    transport: Transport,
    sock_path: str,
    opts: RunOptions,
) -> Outcome:
    """Run the pipeline with the main agent; always tells the monitor how it ended."""
    agent = Agent(MAIN_AGENT, transport, flush_interval_s=opts.flush_interval_s)
    outcome = Outcome("interrupted", "interrupted before the pipeline started")
    previous = signal.getsignal(signal.SIGTERM)
    on_main = threading.current_thread() is threading.main_thread()
    if on_main:
        signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        t0 = host_now_ticks()
        agent.send_control(MsgType.START, t0, {})
        tracer = tracing.active()
        if tracer is not None and tracer.excluded:
            agent.send_control(MsgType.NOTE, t0, {"trace_excluded": dict(tracer.excluded)})
        runner = Runner(
            pipeline,
            topology.probes,
            agent,
            sock_path,
            flush_interval_s=opts.flush_interval_s,
            tap_capacity=opts.tap_capacity,
            calibrate_every_s=opts.calibrate_every_s,
            t0_ticks=t0,
            ground_truth_dir=_truth_dir(sock_path, opts),
            vq_frames=vq_frames(plan, topology),
            raw_channels=raw_channels(plan, topology, opts.device_trace or opts.trace),
        )
        try:
            runner.start()
            outcome = runner.wait()
        except KeyboardInterrupt:
            runner.stop()
            outcome = Outcome("interrupted", "interrupted by the user (SIGINT)")
        except BaseException:
            runner.stop()
            raise
    except KeyboardInterrupt:
        outcome = Outcome("interrupted", "interrupted by the user (SIGINT)")
    finally:
        agent.flush(final=True)
        end = host_now_ticks()  # after the last records, so none lies beyond the end
        agent.send_control(MsgType.FINISH, end, {"status": outcome.status, "error": outcome.error})
        agent.close(final=True)
        if on_main:
            signal.signal(signal.SIGTERM, previous)
    return outcome


def _truth_dir(sock_path: str, opts: RunOptions) -> str | None:
    """Where the run's processes leave ground truth (beside the monitor's socket)."""
    if not opts.ground_truth:
        return None
    path = os.path.join(os.path.dirname(sock_path), "truth")
    os.makedirs(path, exist_ok=True)
    return path


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _run_inline(
    pipeline: Pipeline,
    plan: Plan,
    topology: Topology,
    meta: RunMeta,
    opts: RunOptions,
    sock_path: str,
    on_frames: FramesCallback | None,
) -> RunResult:
    store: RunStore = (
        DuckDBStore(opts.out, overwrite=opts.overwrite) if opts.out else InMemoryStore()
    )
    service = MonitorService(
        plan,
        topology,
        store,
        meta=meta,
        drop_frame_ns=opts.frame_ns,
        clock_method=opts.clock_method,
        socket_path=sock_path,
        on_frames=on_frames,
        truth_dir=_truth_dir(sock_path, opts),
        trace=opts.trace,
    )
    monitor = InlineMonitor(service)
    outcome = _drive(pipeline, plan, topology, InMemoryTransport(service.inbox), sock_path, opts)
    final = monitor.join()
    if opts.out:
        store.close()
    if final is None:
        return RunResult("failed", "the monitor thread broke", opts.out, store, outcome.stage)
    return RunResult(
        final.status, final.error, opts.out, store, outcome.stage, {"events": final.events}
    )


def _run_process(
    pipeline: Pipeline,
    plan: Plan,
    topology: Topology,
    meta: RunMeta,
    opts: RunOptions,
    sock_path: str,
    on_frames: FramesCallback | None,
) -> RunResult:
    if opts.out is None:
        raise ConfigError("a dedicated monitor process needs an output file (--out)")
    config = {
        "out": str(opts.out),
        "overwrite": opts.overwrite,
        "socket": sock_path,
        "topology": topology.to_dict(),
        "queries": [q.text for q in plan.queries],
        "frame_ns": opts.frame_ns,
        "clock_method": opts.clock_method,
        "meta": _meta_dict(meta),
        "truth_dir": _truth_dir(sock_path, opts),
        "trace": opts.trace,
    }
    cfg_path = os.path.join(os.path.dirname(sock_path), "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f)
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamscope.monitor", cfg_path],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    if not ready.startswith('{"event": "ready"'):
        proc.wait()
        raise StreamscopeError(
            f"the monitor process failed to start: {ready.strip() or 'no output'}"
        )
    done: list[dict[str, Any]] = []
    reader = threading.Thread(target=_read_events, args=(proc.stdout, on_frames, done), daemon=True)
    reader.start()
    outcome = _drive(pipeline, plan, topology, UnixSocketTransport(sock_path), sock_path, opts)
    while True:
        try:
            proc.wait()
            reader.join()
            break
        except KeyboardInterrupt:
            continue  # the monitor is finishing the file; a second Ctrl-C must not lose it
    if not done:
        return RunResult(
            "failed",
            f"the monitor process exited with code {proc.returncode}",
            opts.out,
            None,
            outcome.stage,
        )
    d = done[-1]
    return RunResult(
        d["status"], d.get("error"), opts.out, None, outcome.stage, {"events": d.get("events", 0)}
    )


def _meta_dict(meta: RunMeta) -> dict[str, Any]:
    return {f.name: getattr(meta, f.name) for f in dataclasses.fields(meta)}


def _read_events(
    stream: IO[str], on_frames: FramesCallback | None, done: list[dict[str, Any]]
) -> None:
    for line in stream:
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        if ev.get("event") == "frames" and on_frames is not None:
            results = [FrameResult.from_dict(r) for r in ev["results"]]
            drops = [DropCount(**d) for d in ev["drops"]]
            on_frames(results, drops)
        elif ev.get("event") == "done":
            done.append(ev)
