"""``streamscope report RUN -o report.html [--compare OTHER]``: one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    run_file: Annotated[
        Path, typer.Argument(metavar="RUN", help="A run file written by `streamscope run`.")
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", help="Where to write the page (default: RUN with the suffix .html)."
        ),
    ] = None,
    compare_with: Annotated[
        Path | None,
        typer.Option(
            "--compare", metavar="OTHER_RUN", help="Add a section comparing RUN with this run."
        ),
    ] = None,
) -> int:
    """Write an HTML report of a run: findings, the pipeline with its performance, per-frame
    plots, histograms, latency box-whiskers, virtual queues and clock calibration. The file is
    self-contained (plotly.js inlined) and works offline."""
    from streamscope.cli.common import echo
    from streamscope.core.errors import ConfigError
    from streamscope.report import write_report

    target = out if out is not None else run_file.with_suffix(".html")
    if target.resolve() == run_file.resolve():
        raise ConfigError(f"--out {target} would overwrite the run file")
    if target.parent and not target.parent.is_dir():
        raise ConfigError(f"--out {target}: the folder {target.parent} does not exist")
    summary = write_report(run_file, target, compare_with=compare_with)
    echo(f"wrote {summary.path} ({summary.bytes / 1e6:.1f} MB): {', '.join(summary.sections)}")
    return 0
