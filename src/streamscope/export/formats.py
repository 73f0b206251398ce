"""The trace formats a run exports to, in one table: a new format is a module with one
``base.Exporter`` and a row here (the command line's ``--format`` and its help follow).

In: nothing (importing this costs nothing: the exporters are imported only when used). Out:
``EXPORTERS`` and the help that lists them.
"""

from __future__ import annotations

#: Every format, in the order offered: its name, its exporter (``module:Class``, imported only
#: when used: some load large libraries when they write) and what ``--format``'s help says.
EXPORTERS: tuple[tuple[str, str, str], ...] = (
    ("perfetto", "streamscope.export.perfetto:PerfettoExporter", "perfetto (.pftrace)"),
    ("otf2", "streamscope.export.otf2_writer:OTF2Exporter", "otf2 (a directory)"),
    ("chrome", "streamscope.export.chrome:ChromeExporter", "chrome (.json)"),
    ("folded", "streamscope.export.folded:FoldedExporter",
     "folded (.folded: each stage's sampled stacks, for flame-graph tools)"),
)  # fmt: skip


def formats_help() -> str:
    """The formats as ``--format``'s help lists them."""
    said = [text for _, _, text in EXPORTERS]
    return f"{', '.join(said[:-1])} or {said[-1]}." if len(said) > 1 else f"{said[0]}."
