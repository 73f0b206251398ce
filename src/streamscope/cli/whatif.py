"""``streamscope whatif RUN --set CHANGE ...``: what a change would gain, predicted from one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from streamscope.analysis.whatif import Predictor, WhatIf


def whatif(
    run: Annotated[Path, typer.Argument(metavar="RUN", help="The run file to predict from.")],
    changes: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="CHANGE",
            help="A change, TARGET.ATTRIBUTE=VALUE (repeat for several): 'walk*.replicas=12', "
            "'avg.speed=2x', 'avg -> print.capacity=128', 'cpus=4'.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the prediction as JSON instead of a table.")
    ] = False,
    replications: Annotated[
        int, typer.Option(help="Simulated runs of each model (the interval comes from them).")
    ] = 8,
    seed: Annotated[int, typer.Option(help="Seed of the simulations' random numbers.")] = 0,
    tolerance: Annotated[
        float,
        typer.Option(
            help="How far (relative) the unchanged model's throughput may be from the run's."
        ),
    ] = 0.10,
) -> int:
    """Predict what changes would do to a recorded pipeline or program: its throughput (with an
    interval), each stage's states, each channel's occupancy and what then limits the rate,
    beside the measured run. Without --set, the obvious changes (the bottleneck's replicas and
    speed doubled, each mostly full channel's capacity doubled). It is simulated from the run's
    own service times; the unchanged model must first reproduce the run, or nothing is
    predicted (exit status 3). On a program, replicas are its threads, processes or tasks
    taking from the same queue, and each prediction says what to change in it."""
    from streamscope.analysis import findings
    from streamscope.analysis.whatif import Change, Predictor
    from streamscope.core.errors import ConfigError
    from streamscope.report.console import SafeConsole
    from streamscope.store.reader import load

    if replications < 2:
        raise ConfigError(f"--replications must be at least 2, not {replications}")
    if not 0 < tolerance < 1:
        raise ConfigError(f"--tolerance must be between 0 and 1, not {tolerance}")
    parsed = [Change.parse(c) for c in changes or ()]
    with load(run) as r:
        p = Predictor(r, replications=replications, seed=seed, tolerance=tolerance)
        if parsed:
            results = [p.predict(parsed)]
        elif p.check.verdict == "consistent":
            results = p.obvious(r, findings(r))
        else:
            results = [p.predict([])]
    code = 0 if p.check.verdict == "consistent" else 3
    if parsed:
        if as_json:
            typer.echo(json.dumps(results[0].to_dict(), indent=2, allow_nan=False))
        else:
            print_whatif(results[0], SafeConsole())
        return code
    if as_json:
        doc = {"check": p.check.verdict, "misses": list(p.check.misses),
               "predictions": [w.to_dict() for w in results]}  # fmt: skip
        typer.echo(json.dumps(doc, indent=2, allow_nan=False))
        return code
    print_obvious(p, results, SafeConsole())
    return code


def print_obvious(p: Predictor, results: list[WhatIf], console: Console) -> None:
    """Without changes: the self-check, then the obvious changes' predictions in a table."""
    from rich.table import Table

    c = p.check
    if c.verdict != "consistent":
        console.print(
            "The model does not reproduce this run, so it predicts nothing: "
            + "; ".join(c.misses) + ".", style="bold red", markup=False, soft_wrap=True,
        )  # fmt: skip
        return
    console.print(
        f"The model reproduces this run (throughput {c.throughput_error:+.1%} of the measured "
        f"{p.model.throughput:,.1f}/s). The obvious changes (--set CHANGE for others):",
        markup=False, soft_wrap=True,
    )  # fmt: skip
    table = Table()
    for col, justify in (("change", "left"), ("throughput", "right"), ("interval", "right"),
                         ("gain", "right"), ("then", "left")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for w in results:
        pr = w.predicted
        if pr is None:
            continue
        table.add_row(", ".join(x.text for x in w.changes), f"{pr.throughput:,.1f}/s",
                      f"{pr.low:,.1f}–{pr.high:,.1f}/s", f"{(w.gain or 0) * 100:+.1f} %",
                      pr.limit)  # fmt: skip
    console.print(table)
    for a in p.model.assumed:
        console.print(f"assumed: {a}", markup=False, style="dim")


def print_whatif(result: WhatIf, console: Console) -> None:
    """The sentence, then the figures side by side: measured, the model, the prediction."""
    style = "bold" if result.check.verdict == "consistent" else "bold red"
    console.print(result.sentence, style=style, markup=False, highlight=False, soft_wrap=True)
    console.print(whatif_table(result))
    for a in result.assumed:
        console.print(f"assumed: {a}", markup=False, style="dim")


def whatif_table(result: WhatIf) -> Table:
    """Rows: throughput, each stage's busy and blocked shares, each channel's occupancy, the
    limit; columns: measured, the unchanged model, the prediction, its change."""
    from rich.table import Table
    from rich.text import Text

    from streamscope.core.fmt import pct
    from streamscope.core.safetext import safe_text

    pred = result.predicted
    changes = safe_text(", ".join(c.text for c in result.changes) or "(none)")
    # a Text, never markup: a function's speed-up (speed[FUNC]) is not a style
    table = Table(
        title=Text(
            f"what if {changes}\nmodel: the "
            f"{'program' if result.measured.program else 'pipeline'} simulated from the run's "
            f"service times; self-check {result.check.verdict}"
        ),
        title_justify="left",
    )
    for col, justify in (("figure", "left"), ("measured", "right"), ("model", "right"),
                         ("predicted", "right"), ("change", "right")):  # fmt: skip
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    m, base = result.measured, result.base

    def rate(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}/s"

    interval = f" ({rate(pred.low)}–{rate(pred.high)})" if pred is not None else ""
    gain = result.gain
    table.add_row(
        "throughput (sources)",
        rate(m.throughput),
        rate(base.throughput),
        (rate(pred.throughput) + interval) if pred is not None else "-",
        f"{gain * 100:+.1f} %" if gain is not None else "-",
    )
    units = base.units() | (pred.units() if pred is not None else {})
    for unit in units:
        members = (base.units().get(unit, ()), pred.units().get(unit, ()) if pred else ())
        for i, (label, fig) in enumerate((("busy", "busy"), ("blocked in", "blocked_in"),
                                          ("blocked out", "blocked_out"))):  # fmt: skip
            meas = [m.shares[s][i] for s in members[0] if s in m.shares]
            mv = sum(meas) / len(meas) if meas else None
            b = _mean(getattr(base, fig), members[0])
            p = _mean(getattr(pred, fig), members[1]) if pred is not None else None
            if max((v or 0.0) for v in (b, p, mv)) < 0.005:
                continue
            table.add_row(
                f"stage {unit} {label}",
                pct(mv) if mv is not None else "-",
                pct(b) if b is not None else "-",
                pct(p) if p is not None else "-",
                f"{(p - mv) * 100:+.1f} pts" if p is not None and mv is not None else "-",
            )
    chans = base.channel_units() | (pred.channel_units() if pred is not None else {})
    for c in chans:
        members = (base.channel_units().get(c, ()), pred.channel_units().get(c, ()) if pred else ())
        mv = _mean(m.occupancy, members[0])
        b = _mean(base.occupancy, members[0])
        p = _mean(pred.occupancy, members[1]) if pred is not None else None
        table.add_row(
            f"occupancy {c}",
            f"{mv:.2f}" if mv is not None else "-",
            f"{b:.2f}" if b is not None else "-",
            f"{p:.2f}" if p is not None else "-",
            f"{p - mv:+.2f}" if p is not None and mv is not None else "-",
        )
    table.add_row("limits the rate", "", base.bottleneck or "(sources)",
                  (pred.bottleneck or "(sources)") if pred is not None else "-", "")  # fmt: skip
    return table


def _mean(values: dict[str, float], keys: tuple[str, ...]) -> float | None:
    """The mean of ``values`` over ``keys`` (a unit's members), ``None`` where none has one."""
    got = [values[k] for k in keys if k in values]
    return sum(got) / len(got) if got else None
