"""What each probe recorded and what was lost, per drop frame: the monitor's own accounting.

In: each batch's records and the refusals noticed with them (``charge``), the records kept per
probe (``kept``), and records dropped (refused by a full ring, too late to place in time, or of a
clock never calibrated). Out: ``DropCount``s, a drop frame at a time, and the events each probe
saw (the ``overhead`` table's counts).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.frames import frame_index, runs
from streamscope.aggregate.points import DropCount


class Ledger:
    """Counts per (probe, drop frame); mutable: it fills as batches come and empties as drop
    frames close."""

    def __init__(self, frame_ns: int) -> None:
        self.frame_ns = frame_ns
        self.recorded: dict[tuple[int, int], int] = {}
        self.dropped: dict[tuple[int, int], int] = {}
        #: Events (kept or refused), per probe id.
        self.probe_events: dict[int, int] = {}
        self.events_seen = 0
        #: Records that came too late to place in time (their span was reduced already), or
        #: whose clock was never calibrated.
        self.late = 0

    def charge(self, probes: NDArray[np.int64], drops: Sequence[tuple[int, int, int]]) -> None:
        """Count each probe's events: its records ``probes`` and refusals ``(probe, t, n)``."""
        if len(probes):
            ids, counts = np.unique(probes, return_counts=True)
            for pid, n in zip(ids.tolist(), counts.tolist(), strict=True):
                self.probe_events[pid] = self.probe_events.get(pid, 0) + n
        for pid, _, n in drops:
            self.probe_events[pid] = self.probe_events.get(pid, 0) + n
        self.events_seen += len(probes) + len(drops)

    def kept(self, pid: int, t: NDArray[np.int64]) -> None:
        """Probe ``pid``'s records at ``t`` (ns, time-ordered) were kept."""
        n = len(t)
        if not n:
            return
        first, last = max(int(t.min()), 0) // self.frame_ns, max(int(t.max()), 0) // self.frame_ns
        if first == last:  # all in one drop frame, as a drain's few records of a probe mostly
            key = (pid, first)  # are (numpy's runs over them cost ~10 us a probe a drain)
            self.recorded[key] = self.recorded.get(key, 0) + n
            return
        frames, starts = runs(frame_index(np.maximum(t, 0), self.frame_ns))
        counts = np.diff(np.append(starts, len(t)))
        for f, c in zip(frames.tolist(), counts.tolist(), strict=True):
            self.recorded[(pid, f)] = self.recorded.get((pid, f), 0) + c

    def drop(self, pid: int, t_ns: int, n: int, *, late: bool = False) -> None:
        """``n`` of probe ``pid``'s records were lost at ``t_ns``; ``late``: not refused but
        too late to place (or never placeable)."""
        key = (pid, max(t_ns, 0) // self.frame_ns)
        self.dropped[key] = self.dropped.get(key, 0) + n
        if late:
            self.late += n

    def close(self, wm: int, end_ns: int | None) -> list[DropCount]:
        """The counts of every drop frame the watermark ``wm`` passed (all at the end)."""
        last = wm // self.frame_ns - 1 if end_ns is None else None
        keys = sorted(set(self.recorded) | set(self.dropped), key=lambda k: (k[1], k[0]))
        return [
            DropCount(key[0], key[1], self.dropped.pop(key, 0), self.recorded.pop(key, 0))
            for key in keys
            if last is None or key[1] <= last
        ]
