"""The shape every trace format shares: an exporter renders a timeline to a file.

In: a built ``Timeline`` and where to write it. Out: the file (OTF2: a directory) and how many
tracks and events it holds. ``EXPORTERS`` lists the formats; a new one is a module with one
class of this shape, added there.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from streamscope.export.tracks import Timeline


class Exporter(Protocol):
    """One trace format."""

    #: The format's name, as ``--format`` takes it.
    name: str
    #: What its files end with (``.pftrace``); OTF2 writes a directory named so.
    output_file_extension: str

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        """Write ``timeline`` to ``path``; returns (tracks, events written). Tracks are as the
        format counts them: processes, threads and counters, or OTF2's locations."""
        ...


def exporters() -> dict[str, Exporter]:
    """Every format, by name (each module is imported only now: some load large libraries
    when they write)."""
    from streamscope.export.chrome import ChromeExporter
    from streamscope.export.otf2_writer import OTF2Exporter
    from streamscope.export.perfetto import PerfettoExporter

    found: list[Exporter] = [PerfettoExporter(), OTF2Exporter(), ChromeExporter()]
    return {e.name: e for e in found}
