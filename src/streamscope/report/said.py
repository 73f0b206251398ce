"""What a run found, said where people look: at the end of ``streamscope run``, in ``show``, and
in ``show --json`` for a script or a CI job to act on.

In: a ``Run``. Out: ``print_findings`` (the most important findings, a line each, with the
suggestion and, for a bottleneck, what the obvious change would gain: the what-if's sentence)
and ``said_doc`` (every finding, and the obvious changes' predictions or why there are none).
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape

from streamscope.analysis import findings
from streamscope.analysis.context import SEVERITY_ORDER

if TYPE_CHECKING:
    from streamscope.analysis import Finding
    from streamscope.analysis.obvious import Predictions
    from streamscope.store.reader import Run

#: Findings printed at the end of ``run`` and by ``show`` (``show --json`` holds them all).
TOP = 5
_COLOUR = {"problem": "red", "warning": "yellow", "info": "cyan"}


def ranked(run: Run) -> list[Finding]:
    """The run's findings, problems first, then warnings, then the rest (each in the order
    the passes gave them)."""
    found = findings(run)
    return sorted(found, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))


def quotes(run: Run, found: Sequence[Finding]) -> tuple[dict[str, str], Predictions | None]:
    """For each bottleneck finding's unit, what the obvious change would gain (the what-if's
    sentence; simulated), and the predictions themselves; none without a bottleneck."""
    if not any(f.kind == "bottleneck" for f in found):
        return {}, None
    from streamscope.analysis.obvious import predictions

    pred = predictions(run, found)
    said = {f.target: pred.quote(f.target) for f in found if f.kind == "bottleneck"}
    return {k: v for k, v in said.items() if v}, pred


def print_findings(run: Run, console: Console, top: int = TOP) -> None:
    """The ``top`` findings, a line each: severity, title, what to do (the suggestion, or
    what the predictions say instead: ``Predictions.advice``), and for a bottleneck where its
    busy time goes (its sampled stacks) and the what-if's sentence; how many more there
    are."""
    found = ranked(run)
    if not found:
        return
    said, pred = quotes(run, found[:top])
    console.print("findings", style="bold")
    for f in found[:top]:
        colour = _COLOUR.get(f.severity, "white")
        console.print(f"  [{colour}]{escape(f.severity)}[/]: ", end="", markup=True)
        console.print(f.title, markup=False, soft_wrap=True)
        advice = f.suggestion if pred is None else pred.advice(f)
        if advice:
            console.print(f"    {advice}", markup=False, highlight=False, soft_wrap=True)
        if f.kind == "bottleneck" and f.evidence.get("where_time_goes"):
            console.print(f"    where its time goes: {f.evidence['where_time_goes']}",
                          markup=False, highlight=False, soft_wrap=True)  # fmt: skip
        if f.target in said and f.kind == "bottleneck" and advice == f.suggestion:
            console.print(f"    what if: {said[f.target]}", markup=False, highlight=False,
                          soft_wrap=True)  # fmt: skip
    if len(found) > top:
        console.print(f"  and {len(found) - top} more (show --json holds them all)", style="dim")


def said_text(run: Run, style: tuple[int, str | None, bool]) -> tuple[str, str]:
    """The closing summary and the top findings of ``run``, as a console of ``style`` (its
    width, its colour system or None, whether it is a terminal) prints them: what the monitor
    process, which has DuckDB and numpy loaded already and the file open, writes for the
    command that ran the run to print as it is (the command then loads neither)."""
    from streamscope.report.summary import print_summary

    width, colours, terminal = style

    def console() -> Console:
        from streamscope.report.console import SafeConsole

        return SafeConsole(file=io.StringIO(), width=width, color_system=colours,
                           force_terminal=terminal)  # fmt: skip

    summary, found = console(), console()
    assert run.path is not None
    print_summary(run, run.path, summary)
    print_findings(run, found)
    return summary.file.getvalue(), found.file.getvalue()  # type: ignore[attr-defined]


def said_doc(run: Run) -> dict[str, Any]:
    """``show --json``'s ``findings`` (every finding, ranked), ``whatif`` (the obvious
    changes' predictions, or why there are none) and ``stacks`` (where each stage's time
    goes)."""
    from streamscope.analysis.obvious import predictions

    found = ranked(run)
    return {
        "findings": [f.to_dict() for f in found],
        "whatif": predictions(run, found).to_dict(),
        "stacks": stacks_doc(run),
    }


def stacks_doc(run: Run) -> list[dict[str, Any]]:
    """``show --json``'s ``stacks``: each sampled stage's busy time by function
    (``analysis.hotspots``), busiest first."""
    from streamscope.analysis.hotspots import HotFunction, stage_stacks

    def funcs(hot: Sequence[HotFunction]) -> list[dict[str, Any]]:
        return [{"function": h.function, "self": h.self_share, "total": h.total_share}
                for h in hot]  # fmt: skip

    return [
        {"stage": s.stage, "busy_samples": s.busy_samples, "busy_ns": s.busy_ns,
         "running": s.running, "waiting": s.waiting, "functions": funcs(s.functions),
         "waiting_in": funcs(s.waiting_in)}
        for s in sorted(stage_stacks(run).values(), key=lambda s: -s.busy_ns)
    ]  # fmt: skip


__all__ = ["TOP", "print_findings", "quotes", "ranked", "said_doc", "said_text"]
