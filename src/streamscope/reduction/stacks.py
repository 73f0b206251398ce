"""Each stage's sampled stacks, counted per frame: where its workers' time went.

In: the STACK records of each process's stack sampler (``probes/stacks.py``: the worker's state
probe, the state sampled, the sampler's period then and the stack's id in its process's table)
and those tables (one line per stack: its frames from the root, then ``#`` lines: the period,
the sampler's cost so far). Out: ``stacks`` rows, per frame, stage, state and stack: the samples
and the time they stand for; ``stack_sampler`` rows, what each process's sampler cost; ``stack_id`` rows, each process's
stacks by id (what a kept STACK record's id names, for timelines). At most
``MAX_STACKS`` stacks per stage are told apart (the rest are counted as one, ``OTHER``); a
frame's counts are written once the watermark passes its end, so memory stays bounded however
long the run.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

import streamscope
from streamscope.core.records import OWN_FRAME, SampledState
from streamscope.core.tablerows import TableRows, TableSink

#: Distinct stacks kept apart per stage at most.
MAX_STACKS = 1024
#: What the samples of the stacks past ``MAX_STACKS`` (or past a process's table) are called.
OTHER = "[other stacks]"
#: Frames of streamscope's own code (a queue's wrapper, a pipeline's runner), in a row: one
#: frame of this name (its time is the probes' and the runner's, not the stage's code).
OWN = OWN_FRAME
#: A frame whose code the sampler could not read (it ended as it was read): ``?`` for its name
#: and file in the process's table.
UNREAD = "[unreadable frame]"
_OWN = os.path.dirname(os.path.abspath(streamscope.__file__)) + os.sep
_LABELS = {int(s): s.label for s in SampledState}


def _count(text: str, most: int = 1 << 62) -> int:
    """A count or a duration the sampler wrote (ValueError: not a decimal from 0 to ``most``)."""
    if not (text.isascii() and text.isdigit()) or int(text) > most:
        raise ValueError(f"not a count: {text[:20]!r}")
    return int(text)


class _Table:
    """One process's stack table file, read as far as needed."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.offset = 0
        self.stacks: dict[int, str] = {}
        self.period_ns = 10_000_000
        self.process = ""
        self.priority = ""
        self.cost: tuple[int, int, int] | None = None

    def read(self) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1  # a line being written is read next time
        self.offset += end
        for raw in data[:end].decode("utf-8", "replace").splitlines():
            try:
                self._line(raw.split("\t"))
            except ValueError:
                # Not a line the sampler writes: the file is the run's, in a directory any
                # process of the user can write, and what is wrong in it is passed over.
                continue

    def _line(self, f: list[str]) -> None:
        if f[0] == "#period" and len(f) > 1:
            self.period_ns = _count(f[1], 60_000_000_000) or self.period_ns
        elif f[0] == "#process" and len(f) > 1:
            self.process = f[1]
        elif f[0] == "#priority" and len(f) > 1:
            self.priority = f[1]
        elif f[0] == "#cost" and len(f) > 3:
            self.cost = (_count(f[1]), _count(f[2]), _count(f[3]))
        elif f[0].isdigit() and len(f) > 1:
            frames: list[str] = []
            for name, file, line in zip(f[2::3], f[3::3], f[4::3], strict=False):
                frame = (
                    OWN if file.startswith(_OWN)
                    else UNREAD if (name, file) == ("?", "?")
                    else f"{name} ({os.path.basename(file)}:{line})"
                )  # fmt: skip
                if not (frame == OWN and frames and frames[-1] == OWN):
                    frames.append(frame.replace(";", ":"))
            self.stacks[_count(f[0])] = ";".join(frames)

    def stack(self, sid: int) -> str:
        if sid == 0:
            return ""
        if sid not in self.stacks:
            self.read()
        return self.stacks.get(sid, OTHER)


class StackCounts:
    """The counts of the frames not yet written (mutable: filled as the rings are drained)."""

    def __init__(self, frame_ns: int, on_table: TableSink | None) -> None:
        self.frame_ns = max(int(frame_ns), 1)
        self.on_table = on_table
        self.tables: dict[int, _Table] = {}
        #: (frame start, stage, state, stack) -> [samples, ns]
        self.counts: dict[tuple[int, str, str, str], list[int]] = {}
        self._kept: dict[str, set[str]] = {}
        self.samples = 0

    def add_probe(self, pid: int, table: str) -> None:
        self.tables[pid] = _Table(table)

    def take(
        self, pid: int, t: NDArray[np.int64], values: NDArray[np.int64],
        stage_of: Callable[[int], str | None],
    ) -> None:  # fmt: skip
        """Sampler ``pid``'s records (virtual ns ``t``); ``stage_of``: a worker's stage."""
        table = self.tables.get(pid)
        if table is None:
            return
        workers = (values >> 32).tolist()
        shifts = ((values >> 28) & 0xF).tolist()
        states = ((values >> 24) & 0xF).tolist()
        ids = (values & 0xFFFFFF).tolist()
        starts = (t - t % self.frame_ns).tolist()
        for w, sh, st, sid, t0 in zip(workers, shifts, states, ids, starts, strict=True):
            stage = stage_of(w)
            if stage is None:
                continue
            stack = table.stack(sid)
            kept = self._kept.setdefault(stage, set())
            if stack not in kept:
                if len(kept) >= MAX_STACKS:
                    stack = OTHER
                kept.add(stack)
            row = self.counts.setdefault((t0, stage, _LABELS.get(st, "idle"), stack), [0, 0])
            row[0] += 1
            row[1] += table.period_ns << sh
            self.samples += 1

    def flush(self, until: int | None) -> None:
        """Write the counts of the frames that end by ``until`` (None: all of them)."""
        done = [k for k in self.counts if until is None or k[0] + self.frame_ns <= until]
        if not done or self.on_table is None:
            return
        done.sort()
        rows = [(k, self.counts.pop(k)) for k in done]
        self.on_table(TableRows("stacks", {
            "t_ns": [k[0] for k, _ in rows], "frame_ns": [self.frame_ns] * len(rows),
            "stage": [k[1] for k, _ in rows], "state": [k[2] for k, _ in rows],
            "stack": [k[3] for k, _ in rows], "samples": [v[0] for _, v in rows],
            "ns": [v[1] for _, v in rows],
        }))  # fmt: skip

    def finish(self) -> None:
        """At the end: every frame left, and what each process's sampler cost."""
        self.flush(None)
        costs = []
        for pid, table in sorted(self.tables.items()):
            table.read()
            if table.cost is not None:
                costs.append((pid, table))
        if self.on_table is not None:
            named = [(pid, sid, text) for pid, tb in sorted(self.tables.items())
                     for sid, text in sorted(tb.stacks.items())]  # fmt: skip
            if named:
                self.on_table(TableRows("stack_id", {
                    "probe": [p for p, _, _ in named], "id": [i for _, i, _ in named],
                    "stack": [t for _, _, t in named],
                }))  # fmt: skip
        if costs and self.on_table is not None:
            self.on_table(TableRows("stack_sampler", {
                "probe": [p for p, _ in costs],
                "process": [tb.process for _, tb in costs],
                "priority": [tb.priority or "normal" for _, tb in costs],
                "period_ns": [tb.period_ns for _, tb in costs],
                "samples": [tb.cost[1] for _, tb in costs if tb.cost],
                "cpu_ns": [tb.cost[0] for _, tb in costs if tb.cost],
                "wall_ns": [tb.cost[2] for _, tb in costs if tb.cost],
            }))  # fmt: skip


__all__ = ["MAX_STACKS", "OTHER", "OWN", "StackCounts"]
