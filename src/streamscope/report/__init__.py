"""Reports of a recorded run: ``write_report(run_or_path, out_path, compare_with=None)`` writes
one self-contained HTML page (findings, the pipeline drawn with its performance, per-frame plots,
histograms, box-whisker plots, virtual queues, clock calibration, drops, and a comparison).

The page inlines plotly.js and fetches nothing: it works offline. ``render`` returns the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streamscope.store.reader import Run

__all__ = ["ReportSummary", "render", "render_report", "write_report"]


def __getattr__(name: str) -> Any:
    """``render`` loads the renderer when first asked for (the terminal view, in this package
    too, is wanted by every run and needs none of it)."""
    if name == "render":
        from streamscope.report.html import render

        return render
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True, slots=True)
class ReportSummary:
    """What ``write_report`` wrote: the file, its size in bytes, and its sections' ids."""

    path: Path
    bytes: int
    sections: tuple[str, ...]


def render_report(run: Run, compare_with: Run | None = None) -> tuple[str, tuple[str, ...]]:
    """The report page for ``run`` (compared with ``compare_with`` if given) and its sections."""
    from streamscope.report.html import render

    html, sections = render(run, compare_with)
    return html, tuple(sections)


def write_report(
    run_or_path: Run | str | Path,
    out_path: str | Path,
    compare_with: Run | str | Path | None = None,
) -> ReportSummary:
    """Write the report of a run (a ``Run`` or a run file's path) to ``out_path``.

    A run given as a path is opened and closed here; a ``Run`` is left open. Raises
    ``RunFileError`` for a path that is not a readable run file.
    """
    from streamscope.store.reader import Run, load

    opened: list[Run] = []

    def get(x: Run | str | Path) -> Run:
        if isinstance(x, Run):
            return x
        r = load(x)
        opened.append(r)
        return r

    try:
        run = get(run_or_path)
        other = get(compare_with) if compare_with is not None else None
        html, sections = render_report(run, other)
    finally:
        for r in opened:
            r.close()
    out = Path(out_path)
    data = html.encode("utf-8")
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_bytes(data)
    tmp.replace(out)
    return ReportSummary(out, len(data), sections)
