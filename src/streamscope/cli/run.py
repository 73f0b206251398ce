"""``streamscope run APP.py``: load the app (or the program), check the queries, run it
monitored, summarise.

In: the command line. Out: the run file, what the run showed while it went, its summary, and
the exit status.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from streamscope.cli.running import RunRequest, run_app, run_program

if TYPE_CHECKING:
    from streamscope.core.modes import ClockMethod


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
    keep: Annotated[
        str | None,
        typer.Option(
            help="Keep frames at full resolution for this long (e.g. 10m, 1h) and roll older "
            "ones up into coarser frames as the run goes: a run of any length holds a bounded "
            "number of frames, and its totals and whole-run figures stay what they were."
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
    stacks: Annotated[
        bool,
        typer.Option(
            help="Sample each stage worker's Python stack (100 a second each, fewer when the "
            "sampler's own thread takes more than half a percent of a core): where each stage's "
            "busy time goes, in findings, `show` and the report."
        ),
    ] = True,
    stacks_hz: Annotated[
        float,
        typer.Option(
            min=1.0,
            max=1000.0,
            help="Stack samples a second per worker asked for (its share of a core grows with it).",
        ),
    ] = 100.0,
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
    metrics: Annotated[
        str | None,
        typer.Option(
            "--metrics",
            metavar="[HOST:]PORT",
            help="Serve the run's figures for Prometheus at /metrics on this address while "
            "it goes on (127.0.0.1 when only PORT is given; 0: any free port; its address is "
            "printed).",
        ),
    ] = None,
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
        keep_ns=duration_option(keep, "--keep") if keep is not None else None,
        ray_address=ray_address, stack_hz=stacks_hz if stacks else 0.0,
    )  # fmt: skip
    if tap_capacity is not None:
        options = replace(options, tap_capacity=tap_capacity)
    request = RunRequest(
        options=options, out=out, quiet=quiet, query=tuple(query or ()), queries=queries,
        report=report, serve_port=serve_port if serve else None,
        metrics=_metrics_address(metrics) if metrics is not None else None,
        trace_stages=tuple(trace_stage or ()), trace_modules=tuple(trace_module or ()),
        trace_exclude=tuple(trace_exclude or ()), trace_max_rate=trace_max_rate,
    )  # fmt: skip
    argv = list(app_args or [])
    if module is not None:  # as python -m MODULE ARGS: a file named first is its first argument
        argv = [*([str(app)] if app is not None else []), *argv]
        return run_program(module, argv, request, as_module=True)
    if app is None:
        raise ConfigError("name the app file to run (or a module with -m MODULE)")
    if not is_app(app):
        return run_program(str(app), argv, request, as_module=False)
    return run_app(app, argv, request)


def _metrics_address(text: str) -> tuple[str, int]:
    """``--metrics [HOST:]PORT``, read where what serves it is (loaded only when asked)."""
    from streamscope.report.metrics import metrics_address

    return metrics_address(text)


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
