"""``streamscope sql RUN "SELECT ..."``: SQL over a run file (read-only), as a table, CSV or JSON."""

from __future__ import annotations

import base64
import csv
import datetime
import decimal
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Any

import typer


def json_value(v: Any) -> Any:
    """A SQL value as strict JSON: NaN and ±∞ as null; timestamps, dates and times as ISO 8601
    strings; intervals as ISO 8601 durations (``P1DT2.5S``); blobs as base64; decimals as
    numbers; UUIDs as strings; lists, structs and maps element by element."""
    if v is None or isinstance(v, bool | int | str):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, decimal.Decimal):
        return json_value(float(v))
    if isinstance(v, datetime.datetime | datetime.date | datetime.time):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        sign = "-" if v < datetime.timedelta(0) else ""
        v = abs(v)
        secs = v.seconds + v.microseconds / 1e6
        return f"{sign}P{v.days}DT{secs:g}S"
    if isinstance(v, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, dict):
        return {str(k): json_value(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [json_value(x) for x in v]
    return str(v)  # UUIDs, and anything else DuckDB may hand back: its text


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
    """Run SQL over a run file. The tables are documented in docs/run-file.md. Only the run
    file can be reached: no other file, extension or network."""
    from rich.table import Table

    from streamscope.report.console import SafeConsole
    from streamscope.store.reader import load

    with load(run_file) as run:
        columns, rows = run.sql(query)
    if fmt == "csv":
        w = csv.writer(sys.stdout)
        if sys.stdout.isatty():  # exact where the values go to a file or a program
            from streamscope.core.safetext import safe_text

            columns = [safe_text(c) for c in columns]
            rows = [tuple(safe_text(v) if isinstance(v, str) else v for v in r) for r in rows]
        w.writerow(columns)
        w.writerows(rows)
    elif fmt == "json":
        doc = [{c: json_value(v) for c, v in zip(columns, r, strict=True)} for r in rows]
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
    elif fmt == "table":
        table = Table(*columns)
        for r in rows:
            table.add_row(*("NULL" if v is None else str(v) for v in r))
        SafeConsole().print(table)
    else:
        from streamscope.core.errors import ConfigError

        raise ConfigError(f"unknown --format {fmt!r}; valid: table, csv, json")
    return 0
