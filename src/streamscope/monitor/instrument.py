"""Monitoring a program that uses ``streamscope.Queue``/``MPQueue``/``stage`` instead of a Pipeline.

In: queries over the stages and queues the program declared. Out: the same run file or in-memory
run as ``session.run``; the program runs inside ``with streamscope.monitor(...)``.
"""

from __future__ import annotations

import multiprocessing.util
import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from streamscope.core.clock import host_now_ticks
from streamscope.monitor.service import MAIN_AGENT, InlineMonitor, MonitorService
from streamscope.monitor.session import (
    FramesCallback,
    RunOptions,
    RunResult,
    _check_out,
    _meta,
)
from streamscope.pipeline.dropin import REGISTRY
from streamscope.pipeline.pipeline import Pipeline, plan_probes
from streamscope.probes.agent import Agent
from streamscope.probes.taps import Tap
from streamscope.query.ast import Query
from streamscope.query.compile import compile_queries
from streamscope.store.writer import DuckDBStore, InMemoryStore, RunStore
from streamscope.transport.channels import InMemoryTransport, UnixSocketTransport
from streamscope.transport.wire import MsgType


@dataclass(slots=True)
class Session:
    """A live drop-in monitoring session; ``result`` is set when the ``with`` block ends."""

    options: RunOptions
    result: RunResult | None = None
    agents: dict[int, Agent] = field(default_factory=dict)


@contextmanager
def monitor(
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: FramesCallback | None = None,
) -> Iterator[Session]:
    """Monitor the program's instrumented queues and stages while the block runs.

    Queues and stages the queries name must exist before the block starts. The monitor runs in
    a thread of this process; processes forked inside the block report over a Unix socket.
    """
    opts = options or RunOptions(mode="inline")
    base = REGISTRY.topology()
    plan = compile_queries(list(queries), base, opts.frame_ns)
    topology = REGISTRY.topology(plan_probes(base, plan.taps))
    _check_out(opts.out, opts.overwrite)
    store: RunStore = (
        DuckDBStore(opts.out, overwrite=opts.overwrite) if opts.out else InMemoryStore()
    )
    tmp = tempfile.mkdtemp(prefix="streamscope-")
    sock = os.path.join(tmp, "monitor.sock")
    service = MonitorService(
        plan,
        topology,
        store,
        meta=_meta(Pipeline("program"), opts),
        drop_frame_ns=opts.frame_ns,
        socket_path=sock,
        on_frames=on_frames,
    )
    monitor = InlineMonitor(service)
    session = Session(opts)
    main_pid = os.getpid()
    main = Agent(
        MAIN_AGENT, InMemoryTransport(service.inbox), flush_interval_s=opts.flush_interval_s
    )
    session.agents[main_pid] = main

    def on_tap(tap: Tap) -> None:
        pid = os.getpid()
        agent = session.agents.get(pid)
        if agent is None:  # first record in a forked child: it gets its own agent and link
            agent = Agent(pid, UnixSocketTransport(sock), flush_interval_s=opts.flush_interval_s)
            session.agents = {pid: agent}
            agent.start()
            multiprocessing.util.Finalize(agent, agent.close, exitpriority=100)
        agent.add(tap)

    REGISTRY.activate(topology.probes, on_tap, opts.tap_capacity)
    main.send_control(MsgType.START, host_now_ticks(), {})
    main.start()
    status, error = "completed", None
    try:
        yield session
    except KeyboardInterrupt:
        status, error = "interrupted", "interrupted by the user (SIGINT)"
        raise
    except BaseException as exc:
        status, error = "failed", f"{type(exc).__name__}: {exc}"
        raise
    finally:
        REGISTRY.deactivate()
        main.flush(final=True)
        end = host_now_ticks()  # after the last records, so none lies beyond the end
        main.send_control(MsgType.FINISH, end, {"status": status, "error": error})
        main.close(final=True)
        final = monitor.join()
        if opts.out:
            store.close()
        shutil.rmtree(tmp, ignore_errors=True)
        if final is None:
            session.result = RunResult("failed", "the monitor thread broke", opts.out, store)
        else:
            session.result = RunResult(final.status, final.error, opts.out, store)


__all__ = ["Session", "monitor"]
