"""``streamscope run APP.py``: load the app (or the program), check the queries, run it
monitored, summarise.

In: the command line. Out: the run file, what the run showed while it went, its summary, and
the exit status.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from streamscope.core.modes import ClockMethod
    from streamscope.core.topology import Topology
    from streamscope.pipeline.describe.pipeline import Pipeline
    from streamscope.query.ast import Query
    from streamscope.query.plan import Plan
    from streamscope.runtime.options import RunOptions, RunResult
    from streamscope.store.writer import QueryRecord


def run(
    app: Annotated[
        Path | None,
        typer.Argument(
            help="Python file: an app that defines pipeline(argv) -> streamscope.Pipeline, or "
            "any program (run as it is, its standard queues, threads and processes watched)."
        ),
    ] = None,
    app_args: Annotated[
        list[str] | None,
        typer.Argument(help="Arguments for the app, after `--` (passed to pipeline(argv))."),
    ] = None,
    module: Annotated[
        str | None,
        typer.Option(
            "--module",
            "-m",
            help="Run this module as a program (as python -m does) instead of a file.",
        ),
    ] = None,
    query: Annotated[
        list[str] | None,
        typer.Option("--query", "-q", help="A performance query; repeat for more."),
    ] = None,
    queries: Annotated[
        Path | None, typer.Option(help="A file of queries, one per line (# comments).")
    ] = None,
    frame: Annotated[
        str, typer.Option(help="Default frame for queries without `every` (e.g. 1s, 500ms).")
    ] = "1s",
    out: Annotated[Path, typer.Option("--out", "-o", help="Run file to write (DuckDB).")] = Path(
        "run.duckdb"
    ),
    overwrite: Annotated[bool, typer.Option(help="Replace the run file if it exists.")] = False,
    inline: Annotated[
        bool, typer.Option(help="Run the monitor in a thread of this process instead of its own.")
    ] = False,
    quiet: Annotated[bool, typer.Option(help="No live view; only the summary.")] = False,
    calibrate_every: Annotated[
        str,
        typer.Option(
            help="Time between short calibration bursts of each clock domain (0: start and end only)."
        ),
    ] = "2s",
    stall: Annotated[
        str,
        typer.Option(
            help="A stage busy this long without finishing anything is said to stall (live, "
            "and as a finding)."
        ),
    ] = "10s",
    timeout: Annotated[
        str | None,
        typer.Option(
            help="End the run after this long (e.g. 30s, 5m): it is then interrupted, saying why."
        ),
    ] = None,
    clock_method: Annotated[
        str,
        typer.Option(
            help="How bursts are fitted: hull (robust, tick-aware) or timetrial (the least-squares"
            " fit of Lancaster & Chamberlain, Crossing Timezones in the TimeTrial Performance"
            " Monitor, 2010)."
        ),
    ] = "hull",
    ray_address: Annotated[
        str | None,
        typer.Option(
            help="A pipeline with hosts: run on the Ray cluster at this address (its nodes "
            "carry the hosts' names as resources) instead of starting one on this machine."
        ),
    ] = None,
    ground_truth: Annotated[
        bool,
        typer.Option(
            help="Validation: record every item's true times on link channels and report each "
            "virtual queue's distance to its true occupancy (the estimate never reads them)."
        ),
    ] = False,
    tap_capacity: Annotated[
        int | None,
        typer.Option(
            help="Records each probe's buffer holds (a power of two; 65536 unless given): what "
            "the monitor has not taken yet when one is full is refused and counted; raise it "
            "when a run says records were lost.",
        ),
    ] = None,
    vq_tolerance: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=10.0,
            help="A virtual queue's frame is rejected when its buffers show the estimate off "
            "by more than this share of it (at least one item), beyond chance and the clocks' "
            "uncertainty.",
        ),
    ] = 0.15,
    device_trace: Annotated[
        bool,
        typer.Option(help="Also ship devices' raw link-buffer records (normally frame summaries)."),
    ] = False,
    trace: Annotated[
        bool,
        typer.Option(
            help="Keep every probe record in the run file, for `streamscope export` timelines."
        ),
    ] = False,
    flight_records: Annotated[
        int,
        typer.Option(
            min=0,
            help="Without --trace, keep the latest N raw records of host stages and channels "
            "(a flight recorder): exports show the run's last stretch (0: none).",
        ),
    ] = 200_000,
    report: Annotated[
        Path | None,
        typer.Option(help="After the run, write the HTML report here."),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Serve the report on loopback while the run goes on, frames pushed as they "
            "close (its address is printed with the token it needs; --serve-port picks the "
            "port).",
        ),
    ] = False,
    serve_port: Annotated[
        int, typer.Option(help="Port of --serve's page on 127.0.0.1 (0: any free one).")
    ] = 0,
    trace_stage: Annotated[
        list[str] | None,
        typer.Option(
            "--trace-stage",
            metavar="PATTERN",
            help="Trace function calls in the threads of these stages (repeatable; their own "
            "code and the app file's functions): enter/exit slices in exports, per-stage "
            "profiles in the run file.",
        ),
    ] = None,
    trace_module: Annotated[
        list[str] | None,
        typer.Option(
            "--trace-module",
            metavar="MODULE[:PATTERN]",
            help="Also trace the functions of this module (repeatable); alone, traces every stage.",
        ),
    ] = None,
    trace_exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--trace-exclude", metavar="PATTERN", help="Never trace functions named like this."
        ),
    ] = None,
    trace_max_rate: Annotated[
        float | None,
        typer.Option(
            "--trace-max-rate",
            metavar="CALLS_PER_S",
            help="Stop tracing a function once it is called more often than this.",
        ),
    ] = None,
) -> int:
    """Run APP.py's pipeline, or any program, under the monitor and write every frame to the
    run file.

    A file that does not import streamscope and name a top-level `pipeline` (an app) is run
    as it is, as `python APP.py ARGS` would
    (`-m MODULE` as `python -m MODULE ARGS`): every thread and process that puts into or gets
    from a standard queue is a stage named after its target, every such queue a channel named
    from who puts and who gets. Its output is its own: streamscope writes to stderr then.

    Exit status: 0 completed, 1 a stage (or the program) failed, 130 interrupted, 2 invalid
    input.
    """
    from streamscope.cli.apploader import is_app
    from streamscope.cli.common import duration_option
    from streamscope.core.errors import ConfigError
    from streamscope.core.modes import RunMode
    from streamscope.runtime.options import RunOptions

    # The run's options, resolved once here; what names the run (the app, its arguments)
    # is filled in when it is known (``RunRequest.options_for``).
    options = RunOptions(
        frame_ns=duration_option(frame, "--frame"), out=out, overwrite=overwrite,
        mode=RunMode.INLINE if inline else RunMode.PROCESS,
        calibrate_every_s=_every_s(calibrate_every), clock_method=_clock_method(clock_method),
        ground_truth=ground_truth, vq_tolerance=vq_tolerance, device_trace=device_trace,
        trace=trace,
        flight_records=flight_records, stall_ns=duration_option(stall, "--stall"),
        timeout_ns=duration_option(timeout, "--timeout") if timeout is not None else None,
        ray_address=ray_address,
    )  # fmt: skip
    if tap_capacity is not None:
        options = replace(options, tap_capacity=tap_capacity)
    request = RunRequest(
        options=options, out=out, quiet=quiet, query=tuple(query or ()), queries=queries,
        report=report, serve_port=serve_port if serve else None,
        trace_stages=tuple(trace_stage or ()), trace_modules=tuple(trace_module or ()),
        trace_exclude=tuple(trace_exclude or ()), trace_max_rate=trace_max_rate,
    )  # fmt: skip
    argv = list(app_args or [])
    if module is not None:  # as python -m MODULE ARGS: a file named first is its first argument
        argv = [*([str(app)] if app is not None else []), *argv]
        return _run_program(module, argv, request, as_module=True)
    if app is None:
        raise ConfigError("name the app file to run (or a module with -m MODULE)")
    if not is_app(app):
        return _run_program(str(app), argv, request, as_module=False)
    return _run_app(app, argv, request)


@dataclass(frozen=True, slots=True)
class RunRequest:
    """What ``streamscope run`` was asked: the run's ``options`` (resolved once, from the
    command line) and what only the command does with a run (its queries' texts, its live
    view and page, its report, what it traces); ``out`` is ``options.out``, never None here."""

    options: RunOptions
    out: Path
    quiet: bool
    query: tuple[str, ...]
    queries: Path | None
    report: Path | None
    #: ``--serve``'s port (0: any free one); ``None`` without ``--serve``.
    serve_port: int | None
    trace_stages: tuple[str, ...]
    trace_modules: tuple[str, ...]
    trace_exclude: tuple[str, ...]
    trace_max_rate: float | None

    def options_for(self, app: str, argv: Sequence[str], *, program: bool) -> RunOptions:
        """The options of a run of ``app`` with ``argv``. A ``program`` has no link channels
        and no devices: the options for those (ground truth, devices' raw records) stay off."""
        opts = self.options
        return replace(
            opts, app=app, argv=tuple(argv), command=shlex.join(["streamscope", *sys.argv[1:]]),
            ground_truth=opts.ground_truth and not program,
            device_trace=opts.device_trace and not program,
        )  # fmt: skip

    @property
    def traced(self) -> bool:
        """Whether function calls are to be traced (any ``--trace-*`` option)."""
        return bool(self.trace_stages or self.trace_modules or self.trace_exclude) or (
            self.trace_max_rate is not None
        )


def _every_s(text: str) -> float:
    """``--calibrate-every`` in seconds (``0``: calibrate at the start and the end only)."""
    from streamscope.cli.common import duration_option

    return 0.0 if text.strip() == "0" else duration_option(text, "--calibrate-every") / 1e9


def _clock_method(text: str) -> ClockMethod:
    from streamscope.core.errors import ConfigError
    from streamscope.core.modes import ClockMethod

    valid = [m.value for m in ClockMethod]
    if text not in valid:
        raise ConfigError(f"unknown --clock-method {text!r}; valid: {', '.join(valid)}")
    return ClockMethod(text)


def _run_app(app: Path, argv: list[str], request: RunRequest) -> int:
    """An app file's pipeline, run monitored; what it shows goes to stdout."""
    from rich.console import Console

    from streamscope.cli.apploader import build_pipeline, default_queries, load_module
    from streamscope.cli.views import open_page, watch
    from streamscope.runtime.session import prepare
    from streamscope.runtime.session import run as run_monitored

    module = load_module(app)
    try:
        pipeline = build_pipeline(module, app, argv)
    except SystemExit as exc:  # the app's own argument parser printed its message
        raise typer.Exit(int(exc.code) if isinstance(exc.code, int) else 2) from None
    if request.traced:
        _trace(pipeline, request)
    texts = _query_texts(request.query, request.queries)
    if not texts:
        texts.extend(default_queries(module, app))  # the app's QUERIES; none: the defaults
    opts = request.options_for(str(app), argv, program=False)
    # compiled once: the live view and page label frames by the plan the run is given
    prepared = prepare(
        pipeline, texts, opts.frame_ns, trace=opts.trace, device_trace=opts.device_trace
    )
    plan, topology = prepared
    console = Console(highlight=False)
    page = None
    if request.serve_port is not None:
        page = open_page(pipeline.name, plan, topology, opts, request.serve_port)
    start = partial(run_monitored, pipeline, texts, opts, prepared=prepared)
    result = watch(start, plan, console, page, quiet=request.quiet, out=request.out)
    return _ended(result, request.out, console, request.report)


def _trace(pipeline: Pipeline, request: RunRequest) -> None:
    """``--trace-*``: trace function calls in the stages named (every stage if none is)."""
    pipeline.trace(
        *request.trace_modules,
        stages=request.trace_stages or ("*",),
        exclude=request.trace_exclude,
        max_calls_per_s=request.trace_max_rate,
    )


def _run_program(target: str, argv: list[str], request: RunRequest, *, as_module: bool) -> int:
    """``streamscope run prog.py`` on a program with no pipeline: run it as it is. What
    streamscope says goes to stderr, so the program's stdout stays its own."""
    from rich.console import Console

    from streamscope.cli.views import open_page, watch
    from streamscope.pipeline.program.dropin import REGISTRY
    from streamscope.runtime.instrument import program_plan
    from streamscope.runtime.program import run_program

    texts = _query_texts(request.query, request.queries)  # none: the session's defaults
    console = Console(highlight=False, stderr=True)
    opts = request.options_for(target, argv, program=True)
    # compiled once: the live view and page label frames by the plan the run is given
    plan = program_plan(texts, opts)
    page = None
    if request.serve_port is not None:
        name = target if as_module else Path(target).stem
        grown = _grown(plan)
        page = open_page(name, plan, REGISTRY.topology(), opts, request.serve_port, grown)
    start = partial(run_program, target, argv, texts, opts, module=as_module, plan=plan)
    result = watch(start, plan, console, page, quiet=request.quiet, out=request.out)
    return _ended(result, request.out, console, request.report)


def _grown(plan: Plan) -> Callable[[], tuple[Topology, list[QueryRecord]]]:
    """For the live page of a program: its stages and channels so far, and the targets the
    plan's queries found among them (as the monitor finds them: ``new_targets``)."""
    from streamscope.core.rings import declared
    from streamscope.monitor.service import query_records
    from streamscope.pipeline.program.dropin import REGISTRY
    from streamscope.query.compile import new_targets

    def grown() -> tuple[Topology, list[QueryRecord]]:
        topo = declared(REGISTRY.directory or "", REGISTRY.topology())
        probes = [(p.kind, p.target) for p in topo.probes]
        found = new_targets(plan, [s.name for s in topo.stages], topo.channels, probes)
        return topo, query_records(plan.grown(found), topo)

    return grown


def _ended(result: RunResult, out: Path, console: Console, report: Path | None) -> int:
    """After a run: its summary, how it ended if not completed, its top findings, its report if
    asked, where its file is; the exit status. What reads the run file back is loaded now, not
    before the run (its start stays short)."""
    from streamscope.cli.common import err_console
    from streamscope.cli.said import print_findings
    from streamscope.cli.summary import print_summary
    from streamscope.report import write_report
    from streamscope.store.reader import load

    print_summary(out, console)
    if result.status != "completed":
        err_console.print(f"streamscope: run {result.status}: {result.error}", markup=False)
    if out.is_file():
        with load(out) as run:
            print_findings(run, console)
    if report is not None and out.is_file():
        written = write_report(out, report)
        console.print(f"report: {written.path}")
    if result.status == "completed":
        console.print(f"run file: {out}")
    return result.exit_code


def _query_texts(query: Sequence[str], queries: Path | None) -> list[Query | str]:
    """The queries of ``--queries FILE`` and each ``--query``, parsed (errors say where)."""
    from streamscope.core.errors import ConfigError
    from streamscope.query.parser import parse_queries

    texts: list[Query | str] = []
    if queries is not None:
        if not queries.is_file():
            raise ConfigError(f"query file {queries} does not exist")
        texts.extend(parse_queries(queries.read_text(), source=str(queries)))
    for i, q in enumerate(query):
        texts.extend(parse_queries(q, source=f"--query #{i + 1}"))
    return texts
