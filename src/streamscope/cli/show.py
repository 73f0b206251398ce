"""``streamscope show RUN``: a recorded run as tables, or as the documented JSON document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer


def show(
    run_file: Annotated[
        Path, typer.Argument(metavar="RUN", help="A run file written by `streamscope run`.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the run as JSON (schema in docs/run-file.md).")
    ] = False,
    last: Annotated[
        int | None, typer.Option(help="Show only the last N frames of each query.")
    ] = None,
) -> int:
    """Show a recorded run: its status, pipeline, every query's frames and dropped records, and
    its top findings (with --json, every finding and the obvious changes' predictions)."""
    from streamscope.report.console import SafeConsole
    from streamscope.report.said import print_findings, said_doc
    from streamscope.report.summary import print_run
    from streamscope.store.reader import load

    with load(run_file) as run:
        if as_json:
            doc = {**run.to_json(), **said_doc(run)}
            typer.echo(json.dumps(doc, indent=2, allow_nan=False))
            return 0
        console = SafeConsole()
        print_run(run, console, last)
        print_findings(run, console)
    return 0
