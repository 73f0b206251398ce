"""The reading side of a probe ring: what the monitor (or a device's own agent) drains.

In: a ring written by ``core.native.Ring`` in another thread or process (layout: ``core.rings``).
Out: the records written since the last drain, as one numpy record array, with what the writer
refused and spent meanwhile; the drained slots are handed back to the writer.
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from streamscope.core import native
from streamscope.core.records import RECORD_DTYPE, Records, empty_records
from streamscope.core.rings import (
    HEADER_BYTES,
    MAGIC,
    W_CAPACITY,
    W_CLOSED,
    W_COST_N,
    W_COST_NS,
    W_DROPPED,
    W_FLAGS,
    W_KIND,
    W_LAST,
    W_MAGIC,
    W_PID,
    W_PROBE,
    W_R,
    W_REFUSED,
    W_TOTAL,
    W_W,
    Mapped,
    file_size,
    map_shared,
    ring_bytes,
)

_PAGE = mmap.PAGESIZE


@dataclass(frozen=True, slots=True)
class Drained:
    """What one drain of one ring gave: its records, and what it refused and spent meanwhile."""

    records: Records
    dropped: int
    cost_ns: int  # sampled ns (cumulative)
    cost_n: int  # sampled events (cumulative)
    total: int  # the register (cumulative)
    last: int  # ticks of the register's last change
    #: Ticks of the oldest record still in the ring (the drain took only part of them), or None.
    left_ticks: int | None = None
    #: The value of the latest refused record (a channel end's sequence number), 0 if none.
    refused: int = 0


@dataclass(frozen=True, slots=True)
class Stats:
    """A ring's counters now (all cumulative)."""

    written: int
    dropped: int
    cost_ns: int
    cost_n: int
    total: int
    last: int


class RingReader:
    """The reading side of one ring. ``drain`` may run in another process than the writer."""

    __slots__ = (
        "_head",
        "_mem",
        "_remote",
        "_seen_dropped",
        "_slots",
        "capacity",
        "flags",
        "kind",
        "path",
        "pid",
        "probe",
    )

    def __init__(self, mem: mmap.mmap, path: str = "") -> None:
        self._mem = mem
        self.path = path
        head = np.frombuffer(mem, dtype="<i8", count=HEADER_BYTES // 8)
        if int(head[W_MAGIC]) & 0xFFFFFFFF != MAGIC:
            raise ValueError(f"{path or 'ring'}: not a streamscope ring (bad magic)")
        self._head = head
        self.probe = int(head[W_PROBE])
        self.kind = int(head[W_KIND])
        self.capacity = int(head[W_CAPACITY])
        self.pid = int(head[W_PID])
        self.flags = int(head[W_FLAGS])
        if len(mem) < ring_bytes(self.capacity):
            raise ValueError(f"{path or 'ring'}: truncated ({len(mem)} bytes)")
        self._slots = np.frombuffer(
            mem, dtype=RECORD_DTYPE, count=self.capacity, offset=HEADER_BYTES
        )
        self._seen_dropped = 0
        #: Written by another process: what this one has read, it need not keep resident.
        self._remote = self.pid != os.getpid()

    @classmethod
    def open(cls, path: str | Path) -> RingReader:
        fd = os.open(path, os.O_RDWR)
        try:
            size = file_size(fd)
            if size < HEADER_BYTES:
                raise ValueError(f"{path}: truncated ({size} bytes)")
            mem = map_shared(fd, size)
        finally:
            os.close(fd)
        return cls(mem, str(path))

    @property
    def address(self) -> int:
        """Where its header lies in this process (0: mapped through ``mmap``, no address)."""
        if not isinstance(self._mem, Mapped):
            return 0
        mem: Any = self._mem  # a ctypes array of the mapping's bytes
        return ctypes.addressof(mem)

    @property
    def closed(self) -> bool:
        """The writer is done with the ring (it may still hold records to drain)."""
        return bool(self._head[W_CLOSED])

    @property
    def written(self) -> int:
        return int(self._head[W_W])

    @property
    def pending(self) -> int:
        return int(self._head[W_W]) - int(self._head[W_R])

    def ticks_at(self, k: int) -> int:
        """Ticks of the ``k``-th record not drained yet (0: the oldest; ``k`` < ``pending``)."""
        r = int(self._head[W_R])
        return int(self._slots[(r + k) & (self.capacity - 1)]["ticks"])

    def count_until(self, limit_ns: int, n: int, to_ns: Callable[[int], int]) -> int:
        """Of the first ``n`` records not drained yet, how many lie at or before ``limit_ns``
        (``to_ns`` maps a record's ticks to virtual time). A ring has one writer, which stamps
        its records in order: a bisection, not a scan."""
        lo, hi = 0, n
        while lo < hi:
            mid = (lo + hi) // 2
            if to_ns(self.ticks_at(mid)) <= limit_ns:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def drain(self, limit: int | None = None) -> Drained:
        """Copy out the records written since the last drain (at most ``limit``), free their
        slots, and say what the writer refused and spent meanwhile.

        ``w`` is read before ``dropped``: a refusal needs a full ring, and a full ring's ``w``
        cannot move until this drain frees slots, so every refusal counted here came after
        every record copied here or before.
        """
        head = self._head
        w = native.load_acquire(self._mem, W_W)
        r = int(head[W_R])
        n = w - r
        partial = False
        if limit is not None and n > limit:
            partial, n = True, limit
        left: int | None = None
        if n > 0:
            cap = self.capacity
            a = r & (cap - 1)
            b = a + n
            if b <= cap:
                out = self._slots[a:b].copy()
            else:
                out = np.concatenate((self._slots[a:cap], self._slots[: b - cap]))
            if partial:
                left = int(self._slots[(r + n) & (cap - 1)]["ticks"])
            native.store_release(self._mem, W_R, r + n)
            if self._remote:
                self._release(a, n)
        else:
            out = empty_records()
        delta = 0
        if not partial:
            # Refusals are reported with the drain that empties the ring: after every record
            # they followed.
            dropped = int(head[W_DROPPED])
            delta = dropped - self._seen_dropped
            self._seen_dropped = dropped
        return Drained(
            out, delta, int(head[W_COST_NS]), int(head[W_COST_N]), int(head[W_TOTAL]),
            int(head[W_LAST]), left, int(head[W_REFUSED]),
        )  # fmt: skip

    def _release(self, first: int, n: int) -> None:
        """Give back the pages of slots just read: the data stays in shared memory for the
        writer, but stops counting in this process's resident memory (a ring is the run's,
        not the reader's)."""
        cap = self.capacity
        spans = [(first, min(n, cap - first))]
        if first + n > cap:
            spans.append((0, first + n - cap))
        for start, count in spans:
            lo = HEADER_BYTES + start * RECORD_DTYPE.itemsize
            hi = lo + count * RECORD_DTYPE.itemsize
            lo = -(-lo // _PAGE) * _PAGE
            hi = hi // _PAGE * _PAGE
            if hi > lo:
                with contextlib.suppress(OSError, ValueError):
                    self._mem.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    def stats(self) -> Stats:
        head = self._head
        return Stats(
            int(head[W_W]), int(head[W_DROPPED]), int(head[W_COST_NS]), int(head[W_COST_N]),
            int(head[W_TOTAL]), int(head[W_LAST]),
        )  # fmt: skip

    def close(self) -> None:
        """Let go of the ring: unmapped once the records copied out of it are let go too."""
        with contextlib.suppress(BufferError, ValueError):
            self._mem.close()
