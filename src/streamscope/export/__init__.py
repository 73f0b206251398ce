"""Exports a run to trace viewers: every resource on one timeline in virtual time.

In: a run (a loaded ``Run`` or a run file's path), a format and an output path. Out: a Perfetto
protobuf trace (``perfetto``), an OTF2 archive directory (``otf2``) or Chrome trace-event JSON
(``chrome``), and an ``ExportSummary`` of what was written. All three are written from one
neutral ``Timeline`` (``build_timeline``): stage state slices per resource and stage thread,
channel occupancy counters (exact level changes from raw records when the run was traced, else
per-frame means), every query stat as a per-frame counter, raw records as instant events, and
each clock domain's fits and bound widths as metadata.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

if TYPE_CHECKING:
    from streamscope.export.base import Exporter, exporters
    from streamscope.export.run import (
        FORMATS,
        ExportSummary,
        export_run,
        extension,
        write_timeline,
    )
    from streamscope.export.timeline import build_timeline
    from streamscope.export.tracks import Timeline

#: Imported when first used: reading a run loads DuckDB, building a timeline numpy.
_EXPORTS = {
    "FORMATS": "streamscope.export.run:FORMATS",
    "ExportSummary": "streamscope.export.run:ExportSummary",
    "Exporter": "streamscope.export.base:Exporter",
    "Timeline": "streamscope.export.tracks:Timeline",
    "build_timeline": "streamscope.export.timeline:build_timeline",
    "export_run": "streamscope.export.run:export_run",
    "exporters": "streamscope.export.base:exporters",
    "extension": "streamscope.export.run:extension",
    "write_timeline": "streamscope.export.run:write_timeline",
}
__all__ = [
    "FORMATS", "ExportSummary", "Exporter", "Timeline", "build_timeline", "export_run",
    "exporters", "extension", "write_timeline",
]  # fmt: skip
__getattr__, __dir__ = lazy_exports(globals(), _EXPORTS)
