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
    """Show a recorded run: its status, pipeline, every query's frames and dropped records."""
    from rich.console import Console

    from streamscope.cli.summary import print_run
    from streamscope.store.reader import load

    with load(run_file) as run:
        if as_json:
            typer.echo(json.dumps(run.to_json(), indent=2))
            return 0
        print_run(run, Console(highlight=False), last)
    return 0
