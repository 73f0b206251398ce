"""Tap buffers: where probes put their fixed-shape records on the application side.

In: raw clock ticks (and a value) per event, written by the application's own thread.
Out: ``drain()`` hands the agent a record array and the count of refused records.
A full buffer never blocks: it refuses, and the refusal is counted.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Callable
from typing import Protocol

import numpy as np

from streamscope.core.records import Kind, Records, State, make_records

#: Default records per tap buffer between two flushes (power of two).
DEFAULT_CAPACITY = 1 << 16


class Tap(Protocol):
    """What the agent needs from any tap."""

    probe: int
    kind: int

    def drain(self) -> tuple[Records, int]:
        """Records written since the last drain, and how many were refused meanwhile."""
        ...


class LockedTap:
    """A channel-end tap written only while ``lock`` is held (the channel's own mutex).

    The value of each record is the item's 1-based sequence number at this end, and it is
    implicit: the buffer refuses every event from the moment it holds ``cap`` records until the
    next drain, so the records kept since a drain are always the first ones, and a drain knows
    their numbers. The hot path, inline in the channel (see ``pipeline.channel``), is
    ``b = tap.buf; if len(b) < tap.cap: b.append(now())``: a list append measured cheaper than an
    index store into a preallocated array, by about a tenth of a ``queue.Queue`` operation.
    """

    __slots__ = ("base", "buf", "cap", "dropped", "kind", "lock", "probe")

    def __init__(
        self, probe: int, kind: Kind, lock: threading.Lock, capacity: int = DEFAULT_CAPACITY
    ) -> None:
        self.probe = probe
        self.kind = int(kind)
        self.lock = lock
        self.cap = capacity
        self.buf: list[int] = []
        self.dropped = 0
        self.base = 0  # events (kept or refused) before the current buffer

    def record(self, ticks: int) -> None:
        """The same as the inlined hot path, for callers that are not performance critical.

        Must be called with ``lock`` held.
        """
        if len(self.buf) < self.cap:
            self.buf.append(ticks)
        else:
            self.dropped += 1

    def drain(self) -> tuple[Records, int]:
        with self.lock:
            buf, dropped = self.buf, self.dropped
            self.buf, self.dropped = [], 0
        n = len(buf)
        base = self.base
        self.base = base + n + dropped
        ticks = np.array(buf, dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        seq = np.arange(base + 1, base + n + 1, dtype=np.int64)
        return make_records(self.kind, self.probe, ticks, seq), dropped


class RingTap:
    """A single-producer single-consumer ring with explicit values, safe without a lock.

    The writer owns ``w`` and ``dropped``; the draining agent owns ``r``. Each index is written by
    one side only, so under the interpreter lock no record is ever both kept and refused.
    """

    __slots__ = (
        "_seen_dropped",
        "cap",
        "dropped",
        "kind",
        "mask",
        "probe",
        "r",
        "ticks",
        "values",
        "w",
    )

    def __init__(self, probe: int, kind: Kind, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity & (capacity - 1):
            raise ValueError("ring capacity must be a power of two")
        self.probe = probe
        self.kind = int(kind)
        self.cap = capacity
        self.mask = capacity - 1
        self.ticks = array("q", bytes(8 * capacity))
        self.values = array("q", bytes(8 * capacity))
        self.w = 0
        self.r = 0
        self.dropped = 0
        self._seen_dropped = 0

    def record(self, ticks: int, value: int) -> bool:
        """Keep one record; False (and counted in ``dropped``) when the ring is full."""
        w = self.w
        if w - self.r < self.cap:
            i = w & self.mask
            self.ticks[i] = ticks
            self.values[i] = value
            self.w = w + 1
            return True
        self.dropped += 1
        return False

    def drain(self) -> tuple[Records, int]:
        w, r = self.w, self.r
        dropped_total = self.dropped
        n = w - r
        idx = (np.arange(r, w, dtype=np.int64) & self.mask) if n else np.zeros(0, dtype=np.int64)
        ticks_all = np.frombuffer(self.ticks, dtype=np.int64)
        values_all = np.frombuffer(self.values, dtype=np.int64)
        records = make_records(self.kind, self.probe, ticks_all[idx], values_all[idx])
        self.r = w
        dropped = dropped_total - self._seen_dropped
        self._seen_dropped = dropped_total
        return records, dropped


class StateTracker:
    """Records a stage's state changes (idle, busy, blocked_in, blocked_out).

    Only real changes are recorded, and a stage records "blocked" only when it really blocks,
    so a stage that never waits costs two records in its whole life.
    """

    __slots__ = ("clock_now", "name", "state", "tap")

    def __init__(self, name: str, tap: RingTap, clock_now: Callable[[], int]) -> None:
        self.name = name
        self.tap = tap
        self.clock_now = clock_now
        self.state = State.IDLE

    def set(self, state: State) -> State:
        """Enter ``state``; returns the previous one so a caller can restore it."""
        prev = self.state
        if state != prev:
            self.state = state
            # RingTap.record, inlined: a state change is on the stage's own path.
            tap = self.tap
            w = tap.w
            if w - tap.r < tap.cap:
                i = w & tap.mask
                tap.ticks[i] = self.clock_now()
                tap.values[i] = state
                tap.w = w + 1
            else:
                tap.dropped += 1
        return prev
