"""What ``streamscope run`` does once its command line is read (``cli.run``): an app's pipeline
or a program, run monitored, and what it says of the run at its end.

In: a ``RunRequest``. Out: the run file, what the run showed while it went, its summary and
top findings, the exit status.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from streamscope.report.plain import console_for

if TYPE_CHECKING:
    from rich.console import Console

    from streamscope.core.topology import Topology
    from streamscope.pipeline.describe.pipeline import Pipeline
    from streamscope.query.ast import Query
    from streamscope.query.plan import Plan
    from streamscope.report.plain import PlainConsole
    from streamscope.runtime.options import RunOptions, RunResult
    from streamscope.store.writer import QueryRecord


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
    #: ``--metrics``' address (host, port); ``None`` without ``--metrics``.
    metrics: tuple[str, int] | None
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


def run_app(app: Path, argv: list[str], request: RunRequest) -> int:
    """An app file's pipeline, run monitored; what it shows goes to stdout."""
    from streamscope.cli.apploader import build_pipeline, default_queries, load_module
    from streamscope.cli.views import open_metrics, open_page, watch
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
    console = console_for("stdout")
    opts = _said_by_monitor(opts, console)
    page = None
    if request.serve_port is not None:
        page = open_page(pipeline.name, plan, topology, opts, request.serve_port)
    metrics = (
        None if request.metrics is None else open_metrics(pipeline.name, plan, *request.metrics)
    )
    start = partial(run_monitored, pipeline, texts, opts, prepared=prepared)
    result = watch(start, plan, console, page, quiet=request.quiet, out=request.out,
                   metrics=metrics)  # fmt: skip
    return _ended(result, request.out, console, request.report)


def _trace(pipeline: Pipeline, request: RunRequest) -> None:
    """``--trace-*``: trace function calls in the stages named (every stage if none is)."""
    pipeline.trace(
        *request.trace_modules,
        stages=request.trace_stages or ("*",),
        exclude=request.trace_exclude,
        max_calls_per_s=request.trace_max_rate,
    )


def run_program(target: str, argv: list[str], request: RunRequest, *, as_module: bool) -> int:
    """``streamscope run prog.py`` on a program with no pipeline: run it as it is. What
    streamscope says goes to stderr, so the program's stdout stays its own."""

    from streamscope.cli.views import open_metrics, open_page, watch
    from streamscope.pipeline.program.dropin import REGISTRY
    from streamscope.runtime.instrument import program_plan
    from streamscope.runtime.program import run_program

    if request.traced:
        from streamscope.core.errors import ConfigError

        raise ConfigError(
            "--trace-stage, --trace-module, --trace-exclude and --trace-max-rate trace a "
            "pipeline's stages; a program runs as it is, untraced: where each of its stages' "
            "time goes is in its sampled stacks (`streamscope show RUN`, the report, "
            "`streamscope export RUN --format folded`)"
        )
    texts = _query_texts(request.query, request.queries)  # none: the session's defaults
    console = console_for("stderr")
    opts = _said_by_monitor(request.options_for(target, argv, program=True), console)
    # compiled once: the live view and page label frames by the plan the run is given
    plan = program_plan(texts, opts)
    page = None
    name = target if as_module else Path(target).stem
    if request.serve_port is not None:
        grown = _grown(plan)
        page = open_page(name, plan, REGISTRY.topology(), opts, request.serve_port, grown)
    # What reads the run back afterwards, where this process does, loads once the program runs
    # (this process only waits for it then, and starts no process but by fork and exec;
    # before, it would slow its start)
    meanwhile = _load_readers_meanwhile if opts.summary_console is None else None
    metrics = None if request.metrics is None else open_metrics(name, plan, *request.metrics)
    start = partial(run_program, target, argv, texts, opts, module=as_module, plan=plan,
                    on_started=meanwhile)  # fmt: skip
    result = watch(start, plan, console, page, quiet=request.quiet, out=request.out,
                   metrics=metrics)  # fmt: skip
    return _ended(result, request.out, console, request.report)


def _said_by_monitor(opts: RunOptions, console: Console | PlainConsole) -> RunOptions:
    """``opts`` with ``console`` for the monitor process to write the run's summary and top
    findings for (it has the readers loaded, and this process then loads none); a run
    monitored in this process is read here."""
    from streamscope.core.modes import RunMode

    if opts.mode != RunMode.PROCESS:
        return opts
    return replace(opts, summary_console=(console.width, console.color_system,
                                          console.is_terminal))  # fmt: skip


def _load_readers_meanwhile() -> None:
    threading.Thread(target=_load_readers, daemon=True, name="streamscope-readers").start()


def _load_readers() -> None:
    """Load the modules ``_ended`` reads the run file with (a failure here is its own there)."""
    with contextlib.suppress(Exception):
        import streamscope.report.said
        import streamscope.report.summary
        import streamscope.store.reader  # noqa: F401


def _grown(plan: Plan) -> Callable[[], tuple[Topology, list[QueryRecord]]]:
    """For the live page of a program: its stages and channels so far, and the targets the
    plan's queries found among them (as the monitor finds them: ``new_targets``)."""
    from streamscope.core.rings import declared
    from streamscope.monitor.service import query_records
    from streamscope.pipeline.program.dropin import REGISTRY
    from streamscope.query.follow import new_targets

    def grown() -> tuple[Topology, list[QueryRecord]]:
        topo = declared(REGISTRY.directory or "", REGISTRY.topology())
        probes = [(p.kind, p.target) for p in topo.probes]
        found = new_targets(plan, [s.name for s in topo.stages], topo.channels, probes)
        return topo, query_records(plan.grown(found), topo)

    return grown


def _ended(
    result: RunResult, out: Path, console: Console | PlainConsole, report: Path | None
) -> int:
    """After a run: its summary, how it ended if not completed, its top findings, its report if
    asked, where its file is; the exit status. The summary and findings are the monitor
    process's where it wrote them; else what reads the run file back is loaded now, not
    before the run (its start stays short)."""
    from streamscope.cli.common import err_console
    from streamscope.report.plain import PlainConsole

    said = result.extra.get("said")  # as the monitor process wrote them for this console
    if said is not None:
        console.file.write(said[0])
        _say_status(result, err_console())
        console.file.write(said[1])
        console.file.flush()
    else:
        from streamscope.report.said import print_findings
        from streamscope.report.summary import print_summary
        from streamscope.store.reader import load

        tables = console.rich() if isinstance(console, PlainConsole) else console
        with load(out) as run:  # once: opening a run file is ~25 ms
            print_summary(run, out, tables)
            _say_status(result, err_console())
            print_findings(run, tables)
    if report is not None and out.is_file():
        from streamscope.report import write_report

        written = write_report(out, report)
        console.print(f"report: {written.path}")
    if result.status == "completed":
        console.print(f"run file: {out}")
    return result.exit_code


def _say_status(result: RunResult, console: Console | PlainConsole) -> None:
    if result.status != "completed":
        console.print(f"streamscope: run {result.status}: {result.error}", markup=False)


def _query_texts(query: Sequence[str], queries: Path | None) -> list[Query | str]:
    """The queries of ``--queries FILE`` and each ``--query``, parsed (errors say where)."""
    if queries is None and not query:
        return []  # the session's defaults, read without the parser (``query/defaults.py``)
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


__all__ = ["RunRequest", "run_app", "run_program"]
