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
        bool, typer.Option("--json", help="Print the run as JSON (schema in the README).")
    ] = False,
    last: Annotated[
        int | None, typer.Option(help="Show only the last N frames of each query.")
    ] = None,
) -> int:
    """Show a recorded run: its status, pipeline, every query's frames and dropped records."""
    from rich.console import Console
    from rich.table import Table

    from streamscope.cli.summary import (
        clock_table,
        frames_table,
        overhead_table,
        profile_table,
        summary_table,
        vq_table,
    )
    from streamscope.core.fmt import fmt_ns
    from streamscope.store.reader import load

    with load(run_file) as run:
        if as_json:
            typer.echo(json.dumps(run.to_json(), indent=2))
            return 0
        console = Console(highlight=False)
        m = run.meta
        console.print(
            f"[bold]{m.name}[/]  app={m.app or '-'}  status=[bold]{run.status}[/]  "
            f"duration={fmt_ns(run.duration_ns)}  frame={fmt_ns(m.frame_ns)}"
        )
        if run.error:
            console.print(f"[red]error:[/] {run.error}", markup=True)
        topo = Table(title="pipeline", title_justify="left")
        for col in ("channel", "capacity", "transport"):
            topo.add_column(col)
        for c in run.topology.channels:
            topo.add_row(c.name, str(c.capacity), c.transport)
        console.print(topo)
        clocks = clock_table(run)
        if clocks is not None:
            console.print(clocks)
        for q in run.queries:
            console.print(frames_table(run, q.id, last))
        vqs = vq_table(run)
        if vqs is not None:
            console.print(vqs)
        console.print(summary_table(run))
        prof = profile_table(run)
        if prof is not None:
            console.print(prof)
        cost = overhead_table(run)
        if cost is not None:
            console.print(cost)
        drops = [d for d in run.drops() if d.dropped]
        if drops:
            t = Table(title="dropped probe records", title_justify="left")
            for col in ("probe", "frame", "dropped", "recorded"):
                t.add_column(col)
            names = {p.id: f"{p.kind} {p.target}" for p in run.topology.probes}
            for d in drops:
                t.add_row(
                    names.get(d.probe_id, str(d.probe_id)),
                    str(d.frame),
                    str(d.dropped),
                    str(d.recorded),
                )
            console.print(t)
    return 0
