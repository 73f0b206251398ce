"""A run exported: its timeline built once, rendered by the format's exporter to a file.

In: a run (a loaded ``Run`` or a run file's path), a format and an output path. Out: the file
(OTF2: a directory) and an ``ExportSummary`` of what was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from streamscope.core.errors import ConfigError
from streamscope.export.base import exporters
from streamscope.export.formats import EXPORTERS
from streamscope.export.timeline import build_timeline
from streamscope.export.tracks import Timeline
from streamscope.store.reader import Run, load

#: The formats, in the order they are offered (``formats.EXPORTERS``).
FORMATS = tuple(name for name, _, _ in EXPORTERS)

__all__ = ["FORMATS", "ExportSummary", "export_run", "extension", "write_timeline"]


def extension(fmt: str) -> str:
    """What a file of format ``fmt`` ends with."""
    return exporters()[fmt].output_file_extension


@dataclass(frozen=True, slots=True)
class ExportSummary:
    """What an export wrote: ``tracks`` (processes, threads and counter tracks; OTF2:
    locations), ``slices`` (state slices), ``counters`` (counter samples), ``events`` (raw
    records as instants) and ``written`` (events in the file, all kinds), ``traced`` (raw records
    of every host probe were kept), ``path``."""

    format: str
    path: Path
    tracks: int
    slices: int
    counters: int
    events: int
    written: int
    traced: bool
    #: Older raw records the flight recorder let go: slices cover the run's last stretch.
    flight_overwritten: int = 0
    #: Stack samples kept as raw records, as instants on their stages' tracks.
    samples: int = 0

    def line(self) -> str:
        """One line for people."""
        traced = "traced" if self.traced else "untraced: counters from frames"
        if self.flight_overwritten:
            traced = (
                f"flight recorder: the run's last {self.events} records, "
                f"{self.flight_overwritten} older let go"
            )
        sampled = f", {self.samples} stack samples" if self.samples else ""
        return (
            f"{self.format}: {self.path} — {self.tracks} tracks, {self.slices} state slices, "
            f"{self.counters} counter samples, {self.events} raw events{sampled} ({traced})"
        )


def export_run(run_or_path: Run | str | Path, fmt: str, path: str | Path) -> ExportSummary:
    """Export ``run_or_path`` as ``fmt`` (one of ``FORMATS``) to ``path`` (OTF2: a directory).

    Raises ``ConfigError`` for an unknown format; a run file that cannot be read raises
    ``RunFileError`` (from ``load``).
    """
    fmt = fmt.lower().strip()
    if fmt not in FORMATS:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if isinstance(run_or_path, Run):
        tl = build_timeline(run_or_path)
    else:
        with load(run_or_path) as run:
            tl = build_timeline(run)
    return write_timeline(tl, fmt, path)


def write_timeline(tl: Timeline, fmt: str, path: str | Path) -> ExportSummary:
    """Write a built ``Timeline`` as ``fmt`` to ``path``; returns what was written."""
    exporter = exporters().get(fmt)
    if exporter is None:
        raise ConfigError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    out = Path(path)
    if out.parent and not out.parent.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
    tracks, written = exporter.render(tl, out)
    return ExportSummary(
        format=fmt,
        path=out,
        tracks=tracks,
        slices=len(tl.slices),
        counters=tl.n_counter_samples,
        events=len(tl.instants),
        written=written,
        traced=tl.traced,
        flight_overwritten=tl.flight_overwritten,
        samples=len(tl.samples),
    )
