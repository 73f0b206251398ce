"""The shape every trace format shares: an exporter renders a timeline to a file.

In: a built ``Timeline`` and where to write it. Out: the file (OTF2: a directory) and how many
tracks and events it holds. ``formats.EXPORTERS`` lists the formats; a new one is a module with one
class of this shape and a row there (the command line's ``--format`` and its help follow).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Protocol

from streamscope.export.formats import EXPORTERS
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
    """Every format's exporter, by name."""
    out: dict[str, Exporter] = {}
    for name, where, _ in EXPORTERS:
        module, _, cls = where.partition(":")
        exporter: Exporter = getattr(importlib.import_module(module), cls)()
        assert exporter.name == name, (exporter.name, name)
        out[name] = exporter
    return out
