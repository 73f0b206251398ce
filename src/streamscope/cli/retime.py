"""``streamscope retime RUN``: refit a run's clock domains with all its calibrations, recompute."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def retime(
    run_file: Annotated[Path, typer.Argument(metavar="RUN", help="A finished run file.")],
    method: Annotated[
        str,
        typer.Option(
            help="hull (robust) or timetrial (the least-squares fit of Lancaster & Chamberlain,"
            " Crossing Timezones in the TimeTrial Performance Monitor, 2010)."
        ),
    ] = "hull",
) -> int:
    """Re-time a run: fit each clock domain to every calibration burst of the run (interpolating
    between bursts) and recompute the frames of every channel that crosses clock domains."""
    from streamscope.cli.common import echo
    from streamscope.monitor.retime import retime as retime_run

    if method not in ("hull", "timetrial"):
        from streamscope.core.errors import ConfigError

        raise ConfigError(f"unknown --method {method!r}; valid: hull, timetrial")
    r = retime_run(run_file, method=method)
    if not r.domains:
        echo(f"{run_file}: no calibrated clock domain; nothing to re-time")
        return 0
    echo(
        f"{run_file}: re-timed {len(r.targets)} target(s), {r.frames} frames, from {r.records} raw "
        f"records and {r.bursts} calibration bursts of {', '.join(r.domains)}"
    )
    return 0
