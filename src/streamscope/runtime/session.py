"""One monitored run, end to end: compile queries, start the monitor, run, finish the file.

In: a ``Pipeline``, queries and options. Out: a ``RunResult`` (status, error, path) and a run file
(or an in-memory store) holding every frame — whatever way the run ends.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from streamscope.agents.assignments import HostPair
from streamscope.agents.host import pair_taps
from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.errors import ConfigError, describe_exception
from streamscope.core.modes import RunStatus, parse
from streamscope.core.process import SignalInterrupt, interruption
from streamscope.core.topology import HOST, Topology, plan_probes
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.run.runner import Outcome, Runner
from streamscope.probes import tracing
from streamscope.probes.stacks import ask_stacks, period_ns
from streamscope.query.ast import Query
from streamscope.query.compile import compile_queries
from streamscope.query.defaults import default_queries
from streamscope.query.plan import Plan
from streamscope.runtime.functrace import TracingSession
from streamscope.runtime.launch import Launched
from streamscope.runtime.options import (
    FramesCallback,
    LagCallback,
    RunOptions,
    RunResult,
    check_out,
    make_meta,
    told_lag,
)
from streamscope.transport.control import Control
from streamscope.transport.wire import MsgType

if TYPE_CHECKING:
    from streamscope.pipeline.run.remote import RemoteHosts
    from streamscope.runtime.hosts.cluster import RayCluster

__all__ = ["FramesCallback", "RunOptions", "RunResult", "prepare", "run"]


def prepare(
    pipeline: Pipeline,
    queries: Sequence[Query | str],
    frame_ns: int,
    *,
    trace: bool = False,
    device_trace: bool = False,
) -> tuple[Plan, Topology]:
    """Validate everything before anything runs: the pipeline, then every query against it;
    the plan compiled once, with where each pair is reduced decided (``Plan.sited``: ``trace``
    and ``device_trace`` as ``RunOptions``'). No queries: the defaults (every channel's
    occupancy, throughput and latency, every stage's state)."""
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(_not_a_pipeline(pipeline))
    pipeline.validate()
    if not queries:  # none asked: every channel and every stage (query/defaults.py)
        queries = default_queries(pipeline.topology())
    plan = compile_queries(list(queries), pipeline.topology(), frame_ns)
    taps = plan.taps | {("trace", s) for s in pipeline.traced_stages()}
    # Every host stage's state is tracked, asked for or not: it is how a stage that hangs is
    # seen. (A device's stages send only what queries ask for: their records cross its link.)
    base = pipeline.topology()
    where = base.stage_domains()
    taps |= {("state", s.name) for s in base.stages if where[s.name] == HOST}
    topology = pipeline.topology(plan_probes(pipeline.topology(), taps))
    plan = plan.sited(topology, trace=trace, device_trace=device_trace)
    plan.link_frames()  # every link's occupancy queries on one frame
    return plan, topology


def host_pairs(plan: Plan) -> dict[str, tuple[HostPair, ...]]:
    """Per cluster host, the pairs its agent reduces to frames (``Plan.host_reduced``)."""
    return {
        host: tuple(HostPair(q.id, q.metric, t.name, t.specs, q.frame_ns) for q, t in pairs)
        for host, pairs in plan.host_reduced.items()
    }


def shipped_probes(plan: Plan, topology: Topology) -> frozenset[int] | None:
    """The probes whose records the monitor reads itself, which cluster hosts send it (every
    other record stays on its host): its measured pairs' taps, the states no host reduces,
    the links whose records cross raw (``Sites.raw_links``; None: every link's), the tags
    leaving and arriving on a followed path (the monitor pairs them, wherever they were
    recorded). None: every probe's (``trace``)."""
    assert plan.sites is not None
    if plan.sites.trace:
        return None
    wanted = set().union(*(pair_taps(q.metric, t.name)
                           for q, t in plan.monitor_measured if q.metric != "state"))  # fmt: skip
    reduced = plan.summarized_states
    links = topology.link_names
    raw = plan.sites.raw_links
    return frozenset(
        p.id
        for p in topology.probes
        if (p.kind, p.target) in wanted
        or (p.kind == "state" and p.target not in reduced)
        or p.kind in ("depart", "arrive")
        or (p.target in links and (raw is None or p.target in raw))
    )


def _not_a_pipeline(what: object) -> str:
    """What to pass to ``run`` instead of ``what``: a pipeline file's ``pipeline(argv)``
    function is called with the program's arguments first."""
    if callable(what):
        name = getattr(what, "__name__", "it")
        return (f"ss.run takes a Pipeline, not the function {name}: call it first, as "
                f"ss.run({name}([]), ...) (its argument: the arguments its program would take)")  # fmt: skip
    return f"ss.run takes a Pipeline, not {type(what).__name__}"


def run(
    pipeline: Pipeline,
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: FramesCallback | None = None,
    on_lag: LagCallback | None = None,
    on_note: Callable[[str], None] | None = None,
    live: bool = False,
    prepared: tuple[Plan, Topology] | None = None,
) -> RunResult:
    """Monitor one run of ``pipeline``. Invalid input raises before anything runs.

    ``on_frames`` sees every frame as the monitor closes it; ``on_lag`` how far the monitor is
    behind the application then (ns: one drain period when it keeps up); ``on_note`` what the
    monitor says while the run goes on (a stage that stalls, and goes on). ``live``: show the
    frames on stderr as they close, as ``streamscope run`` does (a table on a terminal, lines
    otherwise), besides any callbacks. ``prepared``: what ``prepare`` made of ``queries`` for
    these options already (the command line shows its plan before the run starts)."""
    opts = options or RunOptions()
    if prepared is None:
        prepared = prepare(
            pipeline, queries, opts.frame_ns, trace=opts.trace, device_trace=opts.device_trace
        )
    plan, topology = prepared
    check_out(opts.out, opts.overwrite)
    if not live:
        return _run(pipeline, plan, topology, opts, on_frames, on_lag, on_note)
    with live_view(plan, on_frames, on_lag, on_note) as (frames, lag, note):
        return _run(pipeline, plan, topology, opts, frames, lag, note)


def _run(
    pipeline: Pipeline,
    plan: Plan,
    topology: Topology,
    opts: RunOptions,
    on_frames: FramesCallback | None,
    on_lag: LagCallback | None,
    on_note: Callable[[str], None] | None,
) -> RunResult:
    traced = TracingSession(pipeline) if pipeline.tracing is not None else None
    if traced is not None:
        topology = traced.topology(topology)
    launched: Launched | None = None
    cluster = _cluster(pipeline, opts)
    try:
        launched = Launched(
            plan, topology, make_meta(pipeline.name, opts), opts, on_frames, on_lag, on_note
        )
        try:
            outcome = _drive(pipeline, plan, topology, launched, opts, cluster)
        except BaseException:
            # The monitor was told how the run ended: let it finish the file, then raise.
            with contextlib.suppress(Exception):
                launched.finish(None)
            raise
        return launched.finish(outcome.stage)
    finally:
        if traced is not None:
            traced.close()
        if launched is not None:
            launched.cleanup()
        if cluster is not None:
            cluster.close()


def _cluster(pipeline: Pipeline, opts: RunOptions) -> RayCluster | None:
    """The cluster a pipeline's hosts run on: joined at ``opts.ray_address``, or started here
    (one node per host; stopped when the run ends). None: the pipeline has no hosts."""
    hosts = pipeline.hosts()
    if not hosts:
        return None
    from streamscope.runtime.hosts.cluster import RayCluster

    if opts.ray_address:
        return RayCluster.join(hosts, opts.ray_address)
    return RayCluster.start(hosts)


Callbacks = tuple[FramesCallback | None, LagCallback | None, Callable[[str], None] | None]


@contextmanager
def live_view(
    plan: Plan,
    on_frames: FramesCallback | None = None,
    on_lag: LagCallback | None = None,
    on_note: Callable[[str], None] | None = None,
) -> Iterator[Callbacks]:
    """The terminal's live view of ``plan``'s frames on stderr while the block runs: the
    callbacks to give the run, each also calling the one given here (if any)."""
    from streamscope.report.console import SafeConsole
    from streamscope.report.terminal import LiveView

    view = LiveView(plan, SafeConsole(stderr=True))

    def frames(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        view.on_frames(results, drops)
        if on_frames is not None:
            on_frames(results, drops)

    def lag(lag_ns: int, cpu_ns: int | None = None) -> None:
        view.on_lag(lag_ns)
        if on_lag is not None:
            told_lag(on_lag, lag_ns, cpu_ns)

    def note(text: str) -> None:
        view.on_note(text)
        if on_note is not None:
            on_note(text)

    with view:
        yield frames, lag, note


def _drive(
    pipeline: Pipeline,
    plan: Plan,
    topology: Topology,
    launched: Launched,
    opts: RunOptions,
    cluster: RayCluster | None = None,
) -> Outcome:
    """Run the pipeline; always tells the monitor how it ended."""
    control: Control = launched.control
    outcome = Outcome("interrupted", "interrupted before the pipeline started")
    try:
        # From here SIGTERM interrupts the run as Ctrl-C does (``Launched.cleanup`` puts back
        # its handler); either that came while the monitor started does so now.
        launched.let_signals_in({signal.SIGTERM: _sigterm_as_interrupt})
        remote = _hosts(cluster, launched.socket_path, pipeline)  # up before the run starts
        if launched.ring_dir is not None:  # before any stage's process starts
            first_free = max((p.id for p in topology.probes), default=0) + 1
            ask_stacks(launched.ring_dir, period_ns(opts.stack_hz), first_free)
        t0 = launched.begin()
        tracer = tracing.active()
        if tracer is not None and tracer.excluded:
            control.send(MsgType.NOTE, t0, info={"trace_excluded": dict(tracer.excluded)})
        runner = Runner(
            pipeline,
            topology.probes,
            control,
            launched.socket_path,
            ring_dir=launched.ring_dir,
            flush_interval_s=opts.flush_interval_s,
            tap_capacity=opts.tap_capacity,
            calibrate_every_s=opts.calibrate_every_s,
            t0_ticks=t0,
            ground_truth_dir=launched.truth_dir,
            vq_frames=plan.link_frames(),
            raw_channels=plan.sites.raw_links if plan.sites is not None else None,
            remote=remote,
            state_frames=plan.summarized_states,
            host_frames=host_pairs(plan),
            shipped=shipped_probes(plan, topology),
        )
        try:
            runner.start()
            limit = opts.timeout_ns / 1e9 if opts.timeout_ns is not None else None
            outcome = runner.wait(should_stop=launched.failure, timeout_s=limit)
        except KeyboardInterrupt as exc:
            runner.stop()
            outcome = Outcome("interrupted", interruption(exc))
        except BaseException as exc:
            runner.stop()
            outcome = Outcome("failed", f"the run stopped on an error: {describe_exception(exc)}")
            raise
    except KeyboardInterrupt as exc:
        outcome = Outcome("interrupted", interruption(exc))
    finally:
        launched.end(parse(RunStatus, outcome.status, "run status"), outcome.error)
    return outcome


def _hosts(
    cluster: RayCluster | None, socket_path: str | None, pipeline: Pipeline
) -> RemoteHosts | None:
    if cluster is None:
        return None
    from streamscope.runtime.hosts.adapter import ClusterHosts

    return ClusterHosts(cluster, socket_path, pipeline)


def _sigterm_as_interrupt(signum: int, frame: object) -> None:
    raise SignalInterrupt(signum)
