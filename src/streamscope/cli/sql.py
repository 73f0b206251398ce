"""``streamscope sql RUN "SELECT ..."``: SQL over a run file (read-only), as a table, CSV or JSON."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Annotated

import typer


def sql(
    run_file: Annotated[
        Path, typer.Argument(metavar="RUN", help="A run file written by `streamscope run`.")
    ],
    query: Annotated[
        str,
        typer.Argument(
            help="A SQL query; tables: run, stage, channel, query, frame, stat, histogram, drop, ..."
        ),
    ],
    fmt: Annotated[str, typer.Option("--format", help="table, csv or json")] = "table",
) -> int:
    """Run SQL over a run file. The tables are documented in the README."""
    from rich.console import Console
    from rich.table import Table

    from streamscope.store.reader import load

    with load(run_file) as run:
        columns, rows = run.sql(query)
    if fmt == "csv":
        w = csv.writer(sys.stdout)
        w.writerow(columns)
        w.writerows(rows)
    elif fmt == "json":
        typer.echo(
            json.dumps([dict(zip(columns, r, strict=True)) for r in rows], default=str, indent=2)
        )
    elif fmt == "table":
        table = Table(*columns)
        for r in rows:
            table.add_row(*("NULL" if v is None else str(v) for v in r))
        Console(highlight=False).print(table)
    else:
        from streamscope.core.errors import ConfigError

        raise ConfigError(f"unknown --format {fmt!r}; valid: table, csv, json")
    return 0
