"""``streamscope export RUN --format FORMAT -o PATH``: a run for trace viewers (the formats:
``export.formats.EXPORTERS``)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from streamscope.export.formats import formats_help


def export(
    run_file: Annotated[Path, typer.Argument(metavar="RUN", help="A finished run file.")],
    fmt: Annotated[
        str,
        typer.Option("--format", "-f", help=formats_help()),
    ] = "perfetto",
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", help="Where to write (default: RUN with the format's suffix)."
        ),
    ] = None,
) -> int:
    """Export a run to a trace viewer's format: every resource on one timeline in virtual time
    (ns since the run's start) — stage states as slices, channel occupancy and every query stat
    as counters, raw records as events where the run was traced (--trace), and each clock
    domain's fits and bound widths as metadata."""
    from streamscope.cli.common import echo
    from streamscope.core.errors import ConfigError
    from streamscope.export import FORMATS, export_run, extension

    name = fmt.lower().strip()
    if name not in FORMATS:
        raise ConfigError(f"unknown --format {fmt!r}; valid: {', '.join(FORMATS)}")
    out = output if output is not None else run_file.with_suffix(extension(name))
    summary = export_run(run_file, name, out)
    echo(summary.line())
    return 0
