"""What the terminal shows while a run goes on and when it ends (the CLI, and the Python API
when asked: ``live=True``).

In: frame results as the monitor closes them. Out: a live table on a terminal (plain lines when
output is piped), and a closing summary table over all frames.
"""

from __future__ import annotations

import io
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.core.fmt import fmt_ns, fmt_value
from streamscope.report.plain import PlainConsole

if TYPE_CHECKING:
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from streamscope.query.plan import Plan


def describe_points(points: Sequence[Point], unit: str) -> str:
    parts: list[str] = []
    for p in points:
        if isinstance(p, ScalarPoint):
            if p.stat == "uncertainty_ns":
                parts.append(f"uncertainty=±{fmt_value(p.value, 'ns')}")
                continue
            counted = p.stat in ("count", "violations")
            parts.append(f"{p.stat}={fmt_value(p.value, 'items' if counted else unit)}")
        elif isinstance(p, QuantilesPoint):
            parts.extend(
                f"p{q * 100:g}={fmt_value(v, unit)}" for q, v in zip(p.qs, p.values, strict=True)
            )
        elif isinstance(p, DutyPoint):
            parts.extend(
                f"{label}={f * 100:.0f}%"
                for label, f in zip(p.labels, p.fractions, strict=True)
                if f > 0.005
            )
        elif isinstance(p, HistogramPoint):
            total = p.total
            if total > 0:
                mode = max(range(len(p.weights)), key=lambda i: p.weights[i])
                parts.append(f"hist[mode {p.edges[mode]:g}: {p.weights[mode] / total * 100:.0f}%]")
    return "  ".join(parts) or "(no data)"


#: How a frame that waits for a clock's next calibration is marked (its final one follows).
PROVISIONAL = "(provisional)"
#: Printed lines mention the monitor's lag once it is past this (ns); the live table always does.
LAG_SHOWN_NS = 250_000_000


class LiveView:
    """Thread-safe sink for frames; renders them as they close."""

    def __init__(self, plan: Plan, console: Console | PlainConsole) -> None:
        self.plan = plan
        self.console = console
        self.latest: dict[tuple[int, str], FrameResult] = {}
        #: Frames waiting for a clock's next calibration, shown until their final ones come.
        self.waiting: dict[tuple[int, str], FrameResult] = {}
        self._printed: set[tuple[int, str, int]] = set()
        self.dropped = 0
        self.lag_ns = 0
        self.note = ""
        self._lock = threading.Lock()
        self._live: Live | None = None
        #: In a Jupyter kernel: the one output updated in place (else a line per frame).
        self._shown: Any = None
        self._units = {q.id: q.unit for q in plan.queries}
        self._labels = {q.id: q.text for q in plan.queries}

    def __enter__(self) -> LiveView:
        console = self.console
        if console.is_terminal and not isinstance(console, PlainConsole):
            from rich.live import Live  # a live view's, not a summary's

            self._live = Live(self._table(), console=console, refresh_per_second=4, transient=False)
            self._live.__enter__()
        else:
            self._shown = notebook_display()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._table())
            self._live.__exit__(None, None, None)
        self._show()

    def _in_place(self) -> bool:
        return self._live is not None or self._shown is not None

    def _show(self) -> None:
        """The table, where it is shown in place."""
        if self._live is not None:
            self._live.update(self._table())
        elif self._shown is not None:
            from streamscope.report.console import SafeConsole

            text = SafeConsole(file=io.StringIO(), width=120, force_jupyter=False,
                               force_terminal=False)  # fmt: skip
            text.print(self._table())
            self._shown.update({"text/plain": text.file.getvalue()}, raw=True)  # type: ignore[attr-defined]

    def on_frames(self, results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        with self._lock:
            for r in results:
                key = (r.query_id, r.target)
                if r.provisional:
                    if (r.query_id, r.target, r.frame) in self._printed:
                        continue
                    self.waiting[key] = r
                else:
                    self.latest[key] = r
                    if key in self.waiting and self.waiting[key].frame <= r.frame:
                        del self.waiting[key]
                if not self._in_place():
                    self._printed.add((r.query_id, r.target, r.frame))
                    t0 = fmt_ns(r.t_start_ns)
                    text = describe_points(r.points, self._units.get(r.query_id, ""))
                    tag = f" {PROVISIONAL}" if r.provisional else ""
                    self.console.print(
                        f"[{t0:>7}] q{r.query_id} {r.target}: {text.rstrip()}{tag}",
                        markup=False, highlight=False, soft_wrap=True,
                    )  # fmt: skip
            if not self._in_place() and results and self.lag_ns > LAG_SHOWN_NS:
                self.console.print(
                    f"[monitor lag {fmt_ns(self.lag_ns)}]", markup=False, highlight=False
                )
            self.dropped += sum(d.dropped for d in drops)
            self._show()

    def on_note(self, text: str) -> None:
        """What the monitor says while the run goes on (a stage that stalls, and goes on):
        printed at once, and the latest under the table."""
        with self._lock:
            self.note = text
            if not self._in_place():
                self.console.print(f"[note] {text}", markup=False, highlight=False, soft_wrap=True)
            self._show()

    def on_lag(self, lag_ns: int, cpu_ns: int | None = None) -> None:
        """How far the monitor trails the run (shown under the table)."""
        self.lag_ns = lag_ns

    def _table(self) -> Table:
        from rich.table import Table  # an in-place view's (a terminal's, a notebook's)

        table = Table(title="streamscope — latest frames", expand=False)
        table.add_column("query")
        table.add_column("target")
        table.add_column("frame", justify="right")
        table.add_column("values")
        for key in sorted({*self.latest, *self.waiting}):
            qid, target = key
            r = self.waiting.get(key) or self.latest[key]
            tag = f" {PROVISIONAL}" if r.provisional else ""
            table.add_row(
                self._labels.get(qid, str(qid)),
                target,
                f"{r.frame} @ {fmt_ns(r.t_start_ns)}{tag}",
                describe_points(r.points, self._units.get(qid, "")),
            )
        caption = f"monitor lag {fmt_ns(self.lag_ns)}"
        if self.dropped:
            caption += f"; {self.dropped} probe records refused (see `show`)"
        if self.note:
            caption += f"\n{self.note}"
        table.caption = caption
        return table


def notebook_display() -> Any:
    """In a Jupyter kernel, one output to update in place (``IPython.display``'s handle);
    None elsewhere (IPython is not imported for it)."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)() if ipython is not None else None
    if shell is None or not hasattr(shell, "kernel"):
        return None
    from IPython.display import display

    return display({"text/plain": "streamscope: waiting for the first frame"}, raw=True,  # type: ignore[no-untyped-call]
                   display_id=True)  # fmt: skip
