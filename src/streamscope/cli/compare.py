"""``streamscope compare RUN_A RUN_B``: two recorded runs side by side, B judged against A."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from streamscope.analysis import Comparison, Delta

_STYLE = {"better": "green", "worse": "red", "changed": "yellow", "same": "dim", "n/a": "dim"}
_SPEED_STYLE = {"faster": "bold green", "slower": "bold red", "mixed": "bold yellow"}


def compare(
    run_a: Annotated[Path, typer.Argument(metavar="RUN_A", help="The baseline run file.")],
    run_b: Annotated[
        Path, typer.Argument(metavar="RUN_B", help="The run file judged against RUN_A.")
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON instead of a table.")
    ] = False,
    tolerance: Annotated[
        float,
        typer.Option(help="Relative change within which a figure counts as the same (0.05 = 5%)."),
    ] = 0.05,
) -> int:
    """Compare two runs: first whether B is faster than A (throughput and duration), then each
    query's figures over the whole run, stages and drops, with whether B is better, worse or
    the same as A."""
    from streamscope.analysis import compare as compare_runs
    from streamscope.core.errors import ConfigError
    from streamscope.report.console import SafeConsole
    from streamscope.store.reader import load

    if not tolerance >= 0:
        raise ConfigError(f"--tolerance must be 0 or more, not {tolerance}")
    with load(run_a) as a, load(run_b) as b:
        result = compare_runs(a, b, tolerance=tolerance)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2, allow_nan=False))
        return 0
    print_comparison(result, SafeConsole())
    return 0


def print_comparison(result: Comparison, console: Console) -> None:
    """The headline first (is B faster?), then every figure, then the count of verdicts."""
    if result.headline:
        verdict = result.speed.verdict if result.speed is not None else ""
        style = _SPEED_STYLE.get(verdict, "bold")
        console.print(result.headline, style=style, markup=False, highlight=False, soft_wrap=True)
    console.print(comparison_table(result))
    if result.only_a:
        console.print("only in A: " + "; ".join(result.only_a), markup=False)
    if result.only_b:
        console.print("only in B: " + "; ".join(result.only_b), markup=False)
    console.print(result.summary, style="bold", markup=False)


def comparison_table(result: Comparison) -> Table:
    """The rows of ``result`` as a rich table: figure, A, B, change, verdict."""
    from rich.table import Table
    from rich.text import Text

    table = Table(
        title=f"A = {result.name_a} ({result.path_a or '-'})\n"
        f"B = {result.name_b} ({result.path_b or '-'})\n"
        f"B against A, same within {result.tolerance * 100:g} %; (verdict): not counted twice",
        title_justify="left",
    )
    for col, justify in (
        ("figure", "left"),
        ("stat", "left"),
        ("A", "right"),
        ("B", "right"),
        ("change", "right"),
        ("verdict", "left"),
    ):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in result.rows:
        style = _STYLE.get(r.verdict, "")
        verdict = r.verdict if r.counted else f"({r.verdict})"
        table.add_row(
            _label(r),
            r.stat,
            _fmt(r, r.a),
            _fmt(r, r.b),
            _change(r),
            Text(verdict, style=style),
        )
    return table


def _label(r: Delta) -> str:
    """A short name for the row: ``run``, ``stage work`` or the query up to its colon."""
    if r.section == "stage":
        return f"stage {r.name}"
    if r.section == "query":
        head = r.name.split(":", 1)[0].split(" every ", 1)[0].strip()
        return head if r.target in head else f"{head} [{r.target}]"
    return r.name


def _fmt(r: Delta, v: float | str | None) -> str:
    from streamscope.core.fmt import fmt_num, fmt_value, pct

    if isinstance(v, str):
        return v
    if v is None:
        return "-"
    if r.unit == "fraction":
        return pct(v, 1)
    if r.unit in ("state", ""):
        return fmt_num(float(v), 4)
    return fmt_value(v, r.unit)


def _change(r: Delta) -> str:
    if r.delta is None:
        return "-"
    if r.unit == "fraction":
        return f"{r.delta * 100:+.1f} pts"
    if r.relative is None:
        return f"{r.delta:+.4g}"
    return f"{r.relative * 100:+.1f} %"
