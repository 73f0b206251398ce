"""Monitoring a program that uses ``streamscope.Queue``/``MPQueue``/``stage`` instead of a Pipeline.

In: queries over the stages and queues the program declared. Out: the same run file or in-memory
run as ``session.run``; the program runs inside ``with streamscope.monitor(...)``.
"""

from __future__ import annotations

import _thread
import contextlib
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from streamscope.core.errors import ConfigError, StreamscopeError, StreamscopeWarning
from streamscope.core.modes import RunMode, RunStatus
from streamscope.core.process import interruption
from streamscope.core.topology import plan_probes
from streamscope.pipeline.program.dropin import REGISTRY
from streamscope.probes.stacks import period_ns
from streamscope.query.ast import Query
from streamscope.query.compile import compile_queries
from streamscope.query.defaults import CHANNEL_DEFAULTS, PROGRAM_DEFAULTS, STAGE_DEFAULTS
from streamscope.query.follow import watches
from streamscope.query.plan import Plan
from streamscope.runtime.launch import Launched
from streamscope.runtime.options import (
    FramesCallback,
    LagCallback,
    RunOptions,
    RunResult,
    check_out,
    make_meta,
)
from streamscope.store.writer import InMemoryStore

if TYPE_CHECKING:
    from streamscope.runtime.session import Callbacks


@dataclass(slots=True)
class Session:
    """A live drop-in monitoring session; ``result`` is set when the ``with`` block ends
    (mutable for that reason: the caller holds it from the block's start)."""

    options: RunOptions
    result: RunResult | None = None
    #: How the block says the run ended, when it ended without an exception that says so
    #: (a program run in a process of its own: its status and why); None: completed.
    ended: tuple[RunStatus, str | None] | None = None
    #: What the run file keeps said about the run besides its figures (``note`` table).
    notes: list[tuple[str, str]] = field(default_factory=list)
    #: Whether a signal this process got went to its whole process group
    #: (``Launched.group_signal``); None until the monitor is started.
    group_signal: Callable[[int, float], bool | None] | None = None
    #: Tells the monitor figures of the run's own (a control NOTE), while the block runs.
    note: Callable[[dict[str, Any]], None] | None = None
    #: The monitor process's CPU time so far (ns; -1: not known).
    monitor_cpu_ns: Callable[[], int] | None = None


@contextmanager
def monitor(
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: FramesCallback | None = None,
    on_lag: LagCallback | None = None,
    on_note: Callable[[str], None] | None = None,
    name: str = "program",
    live: bool = False,
    time_limit: bool = True,
    plan: Plan | None = None,
) -> Iterator[Session]:
    """Monitor the program's instrumented queues and stages while the block runs.

    Stages and queues may appear while it runs, in this process or in processes it starts
    (forked or spawned): a stage once a thread works in it (``with streamscope.stage(name)``),
    each such thread a worker of it on its own resource; a queue once it is made. A query
    whose names match nothing that appeared warns at the end (``StreamscopeWarning``). The
    program's queues and stage trackers record into rings the monitor drains; the monitor runs
    in a process of its own when ``options.out`` names a run file (``mode="process"``), else in
    a thread here, keeping the run in memory. No queries: the defaults (every channel's
    occupancy, throughput and latency, every stage's state). ``on_frames``, ``on_lag`` and
    ``on_note`` and ``live`` as ``streamscope.run``'s; ``name`` is the run's. ``time_limit``:
    whether the block is interrupted once ``options.timeout_ns`` passed (a caller that runs
    the program elsewhere stops it itself). ``plan``: what ``program_plan`` made of
    ``queries`` for these options already (the command line shows it before the run starts).
    """
    opts = options or RunOptions(mode=RunMode.INLINE)
    opts.refuse_pipeline_only("a program's queues and stages")
    plan = plan if plan is not None else program_plan(queries, opts)
    with contextlib.ExitStack() as stack:
        if live:
            from streamscope.runtime.session import live_view  # a live view's, not every run's

            on_frames, on_lag, on_note = stack.enter_context(
                live_view(plan, on_frames, on_lag, on_note)
            )
        # the defaults ask for what may not be there: only queries asked for warn unmatched
        warn = bool(queries)
        with _monitored(plan, opts, (on_frames, on_lag, on_note), name, time_limit, warn) as s:
            yield s


@contextmanager
def watch(
    queries: Sequence[Query | str] = (),
    options: RunOptions | None = None,
    **kwargs: Any,
) -> Iterator[Session]:
    """``monitor`` for code as it is written: the standard library's queues (``queue``,
    ``asyncio``, ``multiprocessing``), threads, processes, pools and tasks made inside the
    block are watched as ``streamscope run`` watches a program's, the standard classes replaced
    by recorded ones while the block runs and put back after it (left as they are where
    something else, ``streamscope run``, put them there). ``kwargs``: ``monitor``'s."""
    from streamscope.pipeline.program import auto

    with monitor(queries, options, **kwargs) as session:
        mine = not auto.installed()
        auto.install()
        try:
            yield session
        finally:
            if mine:
                auto.uninstall()


def program_plan(queries: Sequence[Query | str], options: RunOptions) -> Plan:
    """The program's queries compiled once, against what it has declared so far (stages and
    queues that appear later are matched as they do), with where each is reduced decided."""
    base = REGISTRY.topology()
    plan = compile_queries(
        open_queries(queries), base, options.frame_ns, open_world=True, follow=False
    )
    return plan.sited(base, trace=options.trace)


@contextmanager
def _monitored(
    plan: Plan,
    opts: RunOptions,
    callbacks: Callbacks,
    name: str,
    time_limit: bool,
    warn_unmatched: bool,
) -> Iterator[Session]:
    """The run of ``monitor``, its callbacks (frames, lag, notes) given whole."""
    on_frames, on_lag, on_note = callbacks
    topology = REGISTRY.topology(plan_probes(REGISTRY.topology(), plan.taps))
    check_out(opts.out, opts.overwrite)
    launched = Launched(plan, topology, make_meta(name, opts), opts, on_frames, on_lag, on_note)
    session = Session(opts, group_signal=launched.group_signal, note=launched.control.note,
                      monitor_cpu_ns=launched.monitor_cpu_ns)  # fmt: skip
    REGISTRY.activate(topology.probes, launched.ring_dir, opts.tap_capacity, watches(plan),
                      period_ns(opts.stack_hz))  # fmt: skip
    launched.begin()
    status, error = RunStatus.COMPLETED, None
    watchdog = _Watchdog(opts.timeout_ns if time_limit else None)
    try:
        launched.let_signals_in()  # one that came while the monitor started ends the run here
        yield session
        if session.ended is not None:
            status, error = session.ended
    except KeyboardInterrupt as exc:
        status, error = RunStatus.INTERRUPTED, watchdog.why or interruption(exc)
        if not watchdog.why:
            raise  # the user's Ctrl-C goes on; a time limit asked for ends here
    except BaseException as exc:
        status, error = RunStatus.FAILED, f"{type(exc).__name__}: {exc}"
        raise
    finally:
        launched.hold_signals()  # the run is ending: a signal now ends nothing more
        watchdog.cancel()
        REGISTRY.deactivate()
        launched.end(status, error, session.notes)
        try:
            session.result = launched.finish(None)
        finally:
            launched.cleanup()
        if warn_unmatched:
            _warn_unmatched(session.result)


class _Watchdog:
    """Ends the block after ``timeout_ns`` (none: never) as Ctrl-C would, saying why."""

    def __init__(self, timeout_ns: int | None) -> None:
        self.why: str | None = None
        self._timer: threading.Timer | None = None
        if timeout_ns is None:
            return
        if threading.current_thread() is not threading.main_thread():
            raise ConfigError("a time limit needs monitor() on the main thread (it interrupts it)")
        self._timer = threading.Timer(timeout_ns / 1e9, self._fire, (timeout_ns / 1e9,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, limit_s: float) -> None:
        self.why = f"stopped after its time limit of {limit_s:g} s"
        _thread.interrupt_main()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def open_queries(queries: Sequence[Query | str]) -> list[Query | str]:
    """The queries of a session whose stages and channels appear as it runs; none asked:
    the defaults, for every channel, stage and event loop that will (``query/defaults.py``)."""
    return list(queries) or [*CHANNEL_DEFAULTS, *STAGE_DEFAULTS, *PROGRAM_DEFAULTS]


def _warn_unmatched(result: RunResult) -> None:
    """Each query whose names matched no stage or queue that appeared while the run went on."""
    store = result.store
    if isinstance(store, InMemoryStore):
        topo, queries = store.topology, store.queries
    elif result.path is not None and result.path.exists():
        from streamscope.store.reader import load  # only now: reading a file loads DuckDB

        try:
            with load(result.path) as run:
                topo, queries = run.topology, run.queries
        except StreamscopeError:
            return  # the run's own status says what went wrong
    else:
        return
    stages = ", ".join(s.name for s in topo.stages) or "(none)"
    for q in queries:
        if not q.targets:
            warnings.warn(
                f"query {q.text!r} matched nothing that ran (stages seen: {stages}; a stage is "
                "seen once a thread works in it, inside streamscope.stage(name))",
                StreamscopeWarning,
                stacklevel=4,
            )
