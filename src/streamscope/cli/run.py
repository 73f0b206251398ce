"""``streamscope run APP.py``: load the app, check the queries, run it monitored, summarise."""

from __future__ import annotations

import contextlib
import shlex
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from streamscope.aggregate.points import DropCount, FrameResult
    from streamscope.core.topology import Topology
    from streamscope.query.ast import Query
    from streamscope.query.compile import Plan
    from streamscope.report.live import LivePage
    from streamscope.runtime.options import FramesCallback, RunOptions, RunResult
    from streamscope.store.writer import QueryRecord

#: How long the live page stays up after the run, for open pages to get its end (s).
LINGER_S = 1.5


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
            help="How bursts are fitted: hull (robust, tick-aware) or timetrial (seed 000)."
        ),
    ] = "hull",
    ground_truth: Annotated[
        bool,
        typer.Option(
            help="Validation: record every item's true times on link channels and report each "
            "virtual queue's distance to its true occupancy (the estimate never reads them)."
        ),
    ] = False,
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
        typer.Option(help="After the run, write the HTML report here and print the top findings."),
    ] = None,
    serve: Annotated[
        bool,
        typer.Option(
            "--serve",
            help="Serve the report on loopback while the run goes on, frames pushed as they "
            "close (its address is printed; --serve-port picks the port).",
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

    A file without a top-level `pipeline` is run as it is, as `python APP.py ARGS` would
    (`-m MODULE` as `python -m MODULE ARGS`): every thread and process that puts into or gets
    from a standard queue is a stage named after its target, every such queue a channel named
    from who puts and who gets. Its output is its own: streamscope writes to stderr then.

    Exit status: 0 completed, 1 a stage (or the program) failed, 130 interrupted, 2 invalid
    input.
    """
    from rich.console import Console

    from streamscope.cli.apploader import (
        build_pipeline,
        default_queries,
        is_app,
        load_module,
    )
    from streamscope.cli.common import duration_option
    from streamscope.core.errors import ConfigError
    from streamscope.report.terminal import LiveView
    from streamscope.runtime.options import RunOptions
    from streamscope.runtime.session import prepare
    from streamscope.runtime.session import run as run_monitored

    frame_ns = duration_option(frame, "--frame")
    every_s = (
        0.0
        if calibrate_every.strip() == "0"
        else duration_option(calibrate_every, "--calibrate-every") / 1e9
    )
    stall_ns = duration_option(stall, "--stall")
    timeout_ns = duration_option(timeout, "--timeout") if timeout is not None else None
    if clock_method not in ("hull", "timetrial"):
        raise ConfigError(f"unknown --clock-method {clock_method!r}; valid: hull, timetrial")
    argv = list(app_args or [])
    if module is not None:
        argv = [*([str(app)] if app is not None else []), *argv]
    elif app is None:
        raise ConfigError("name the app file to run (or a module with -m MODULE)")
    if module is not None or (app is not None and not is_app(app)):
        return _run_program(
            module or str(app), module is not None, argv, query, queries, frame_ns, out,
            overwrite, inline, quiet, every_s, stall_ns, timeout_ns, clock_method, trace, report,
            flight_records, serve_port if serve else None,
        )  # fmt: skip
    assert app is not None
    module_ = load_module(app)
    try:
        pipeline = build_pipeline(module_, app, argv)
    except SystemExit as exc:  # the app's own argument parser printed its message
        raise typer.Exit(int(exc.code) if isinstance(exc.code, int) else 2) from None
    if trace_stage or trace_module or trace_exclude or trace_max_rate is not None:
        pipeline.trace(
            *(trace_module or ()),
            stages=tuple(trace_stage or ("*",)),
            exclude=tuple(trace_exclude or ()),
            max_calls_per_s=trace_max_rate,
        )
    texts = _query_texts(query, queries)
    if not texts:
        texts.extend(default_queries(module_, app))  # the app's QUERIES; none: the defaults
    plan, topology = prepare(pipeline, texts, frame_ns)
    console = Console(highlight=False)
    opts = RunOptions(
        frame_ns=frame_ns,
        out=out,
        overwrite=overwrite,
        mode="inline" if inline else "process",
        app=str(app),
        argv=tuple(argv),
        command=shlex.join(["streamscope", *sys.argv[1:]]),
        calibrate_every_s=every_s,
        clock_method=clock_method,
        ground_truth=ground_truth,
        device_trace=device_trace,
        trace=trace,
        flight_records=flight_records,
        stall_ns=stall_ns,
        timeout_ns=timeout_ns,
    )
    view = LiveView(plan, console)
    page = _live_page(pipeline.name, plan, topology, opts, serve_port) if serve else None
    on_frames = view.on_frames if page is None else _both(view.on_frames, page.on_frames)
    try:
        if quiet:
            result = run_monitored(
                pipeline,
                texts,
                opts,
                on_frames=None if page is None else page.on_frames,
            )
        else:
            with view:
                result = run_monitored(
                    pipeline,
                    texts,
                    opts,
                    on_frames=on_frames,
                    on_lag=view.on_lag,
                    on_note=view.on_note,
                )
    finally:
        if page is not None:
            _end_page(page, out)
    return _ended(result, out, console, report)


def _ended(result: RunResult, out: Path, console: Console, report: Path | None) -> int:
    """After a run: its summary, how it ended if not completed, its report and top findings if
    asked, where its file is; the exit status. What reads the run file back is loaded now, not
    before the run (its start stays short)."""
    from streamscope.cli.common import err_console
    from streamscope.cli.summary import print_findings, print_summary
    from streamscope.report import write_report

    print_summary(out, console)
    if result.status != "completed":
        err_console.print(f"streamscope: run {result.status}: {result.error}", markup=False)
    if report is not None and out.is_file():
        print_findings(out, console)
        written = write_report(out, report)
        console.print(f"report: {written.path}")
    if result.status == "completed":
        console.print(f"run file: {out}")
    return result.exit_code


def _query_texts(query: list[str] | None, queries: Path | None) -> list[Query | str]:
    """The queries of ``--queries FILE`` and each ``--query``, parsed (errors say where)."""
    from streamscope.core.errors import ConfigError
    from streamscope.query.parser import parse_queries

    texts: list[Query | str] = []
    if queries is not None:
        if not queries.is_file():
            raise ConfigError(f"query file {queries} does not exist")
        texts.extend(parse_queries(queries.read_text(), source=str(queries)))
    for i, q in enumerate(query or []):
        texts.extend(parse_queries(q, source=f"--query #{i + 1}"))
    return texts


def _run_program(
    target: str,
    as_module: bool,
    argv: list[str],
    query: list[str] | None,
    queries: Path | None,
    frame_ns: int,
    out: Path,
    overwrite: bool,
    inline: bool,
    quiet: bool,
    every_s: float,
    stall_ns: int,
    timeout_ns: int | None,
    clock_method: str,
    trace: bool,
    report: Path | None,
    flight_records: int,
    serve_port: int | None,
) -> int:
    """``streamscope run prog.py`` on a program with no pipeline: run it as it is. What
    streamscope says goes to stderr, so the program's stdout stays its own."""
    from rich.console import Console

    from streamscope.core.rings import declared
    from streamscope.monitor.service import query_records
    from streamscope.pipeline.dropin import REGISTRY
    from streamscope.query.compile import compile_queries
    from streamscope.report.terminal import LiveView
    from streamscope.runtime.instrument import open_queries
    from streamscope.runtime.options import RunOptions
    from streamscope.runtime.program import run_program

    texts = _query_texts(query, queries)  # none: the session's defaults
    # the plan the live view labels frames by (the session compiles the same)
    plan = compile_queries(open_queries(texts), REGISTRY.topology(), frame_ns, open_world=True)
    console = Console(highlight=False, stderr=True)
    opts = RunOptions(
        frame_ns=frame_ns, out=out, overwrite=overwrite, mode="inline" if inline else "process",
        app=target, argv=tuple(argv), command=shlex.join(["streamscope", *sys.argv[1:]]),
        calibrate_every_s=every_s, clock_method=clock_method, trace=trace, stall_ns=stall_ns,
        timeout_ns=timeout_ns, flight_records=flight_records,
    )  # fmt: skip
    view = LiveView(plan, console)
    page = None
    if serve_port is not None:

        def grown() -> tuple[Topology, list[QueryRecord]]:
            """The program's stages and channels so far, and the queries' targets among them."""
            topo = declared(REGISTRY.directory or "", REGISTRY.topology())
            now = compile_queries(open_queries(texts), topo, frame_ns, open_world=True)
            return topo, query_records(now, topo)

        name = target if as_module else Path(target).stem
        page = _live_page(name, plan, REGISTRY.topology(), opts, serve_port, grown)
    sinks = [f for f in (None if quiet else view.on_frames, page and page.on_frames) if f]
    try:
        if quiet:
            result = run_program(
                target,
                argv,
                texts,
                opts,
                module=as_module,
                on_frames=_both(*sinks) if sinks else None,
            )
        else:
            with view:
                result = run_program(
                    target, argv, texts, opts, module=as_module, on_frames=_both(*sinks),
                    on_lag=view.on_lag, on_note=view.on_note,
                )  # fmt: skip
    finally:
        if page is not None:
            _end_page(page, out)
    return _ended(result, out, console, report)


def _live_page(
    name: str,
    plan: Plan,
    topology: Topology,
    opts: RunOptions,
    port: int,
    grown: Callable[[], tuple[Topology, list[QueryRecord]]] | None = None,
) -> LivePage:
    """``--serve``: the live page, listening before the run starts (its address printed)."""
    from streamscope.cli.common import err_console
    from streamscope.monitor.service import query_records
    from streamscope.report.live import LivePage
    from streamscope.runtime.options import make_meta

    page = LivePage(make_meta(name, opts), topology, query_records(plan, topology), port, grown)
    try:
        url = page.start()
    except OSError as exc:
        from streamscope.core.errors import ConfigError

        raise ConfigError(f"--serve: {exc}") from None
    err_console.print(f"live page: {url}", markup=False, highlight=False)
    return page


def _end_page(page: LivePage, out: Path) -> None:
    """The run ended: the live page says how (from its run file), serves its last report a
    moment longer for open pages to get it, then stops."""
    from streamscope.store.reader import load

    status, duration = "interrupted", 0
    error: str | None = "the run file could not be read"
    with contextlib.suppress(Exception), load(out) as done:
        status, error, duration = done.status, done.error, int(done.duration_ns or 0)
    page.finish(status if status != "running" else "interrupted", error, duration)
    page.stop(linger_s=LINGER_S)


def _both(*sinks: FramesCallback) -> FramesCallback:
    """One frames callback that calls each of ``sinks`` in turn."""

    def call(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        for sink in sinks:
            sink(results, drops)

    return call
