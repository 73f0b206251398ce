"""The folded-stack text flame-graph tools read (FlameGraph's ``flamegraph.pl``, speedscope,
inferno) from a ``Timeline``'s sampled stacks.

In: a ``Timeline`` (its ``stacks``: each stage's sampled stacks over the run). Out: a text
file, one line per stack, ``STAGE;FRAME;...;FRAME COUNT``: the stage as the root frame, then
its frames from the outermost, each ``function (file.py:first line)``; a busy worker's time
while it was not running (asleep, on I/O or a lock) ends in a ``[waiting]`` frame; COUNT is the
time the samples stand for, in microseconds. A worker blocked on its queues or idle is left
out (no code of the stage ran).
"""

from __future__ import annotations

from pathlib import Path

from streamscope.analysis.hotspots import BUSY_STATES
from streamscope.export.tracks import Timeline

#: The leaf frame of a busy worker's samples while it was not running.
WAITING = "[waiting]"


def folded_lines(tl: Timeline) -> list[str]:
    """The file's lines, heaviest first (ties by text)."""
    weight: dict[str, int] = {}
    for stage, state, stack, ns in tl.stacks:
        if state not in BUSY_STATES:
            continue
        frames = [stage, *(f for f in stack.split(";") if f)]
        if state == "waiting":
            frames.append(WAITING)
        key = ";".join(f.replace(";", ":").replace("\n", " ") for f in frames)
        weight[key] = weight.get(key, 0) + ns
    rows = [(k, round(ns / 1000)) for k, ns in weight.items()]
    return [f"{k} {us}" for k, us in sorted(rows, key=lambda r: (-r[1], r[0])) if us > 0]


class FoldedExporter:
    """The ``folded`` format (``export/base.py``)."""

    name = "folded"
    output_file_extension = ".folded"

    def render(self, timeline: Timeline, path: Path) -> tuple[int, int]:
        lines = folded_lines(timeline)
        path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
        return len({line.split(";", 1)[0] for line in lines}), len(lines)
