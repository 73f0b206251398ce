"""The reading side of a probe ring: what the monitor (or a device's own agent) drains.

In: a ring written by ``core.native.Ring`` in another thread or process (layout: ``core.rings``).
Out: the records written since the last drain, as one numpy record array, with what the writer
refused and spent meanwhile; the drained slots are handed back to the writer.

A ring is shared memory that any process of the user can write: nothing read from it is trusted.
Each shared word is read once, checked, then used; what fails a check is dropped and counted in
``RingReader.damage`` (by what was wrong), and the reader goes on with what it can still trust.
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
from streamscope.core.records import RECORD_DTYPE, Kind, Records, empty_records
from streamscope.core.rings import (
    HEADER_BYTES,
    MAGIC,
    SAMPLE_EVERY,
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
    check_capacity,
    file_size,
    map_shared,
    ring_bytes,
)

_PAGE = mmap.PAGESIZE
#: The header words its creator sets once (magic through flags): checked, and put back, at
#: every drain.
_FIXED = W_FLAGS + 1
#: The header's words up to the reader's line: what a drain reads of it (once).
_WORDS = W_R + 1
#: How far a monotonic count of the writer's (refusals) may move between two looks: further,
#: or backwards, and it was overwritten (an honest writer refuses far fewer in a drain period).
LEAP = 1 << 40
_HOUR_NS = 3_600_000_000_000
_U64 = (1 << 64) - 1
#: Record kinds a ring may hold, by kind number (a lookup table: one gather per batch).
_KNOWN_KIND = np.zeros(256, dtype=bool)
_KNOWN_KIND[[int(k) for k in Kind]] = True

#: What ``RingReader.damage`` counts, by what was wrong.
#: Positions (written, read) out of bounds: what the ring held then is lost (not counted).
POSITIONS = "positions out of bounds"
#: The reader's own read position overwritten (put back).
READ_POSITION = "read position overwritten"
#: The header's fixed words (magic, probe, kind, capacity, writer, flags) overwritten (put back).
HEADER = "header overwritten"
#: The closed word neither 0 nor 1 (taken as open).
CLOSED_WORD = "closed word overwritten"
#: The refusal count went back or leapt (the refusals meanwhile are lost).
REFUSALS = "refusal count overwritten"
#: The sampled cost words out of bounds (the ring's cost is not counted).
COST = "cost words overwritten"
#: The ring's file truncated under the reader (read as zeros from then on; the native core's
#: reader only, ``core.rings.map_shared``'s guard).
TRUNCATED = "file truncated"
#: Records of a kind no probe writes (dropped, one each).
KIND = "records of an unknown kind"


def _wrapped(v: int) -> int:
    """``v`` as a 64-bit word holds it: positions count modulo 2**64, as the writer's do."""
    return ((v + (1 << 63)) & _U64) - (1 << 63)


def known_kinds(records: Records) -> Any:
    """Which of ``records`` (a boolean mask) are of a kind some probe writes: one of another
    kind was read from a ring that something else overwrote."""
    return _KNOWN_KIND[np.minimum(records["kind"], 255)]


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
        "_bad",
        "_fixed",
        "_head",
        "_mem",
        "_r",
        "_r0",
        "_refusals",
        "_remote",
        "_seen_dropped",
        "_slots",
        "_taken",
        "capacity",
        "damage",
        "flags",
        "kind",
        "path",
        "pid",
        "probe",
    )

    def __init__(self, mem: mmap.mmap, path: str = "") -> None:
        self._mem = mem
        self.path = path
        where = path or "ring"
        if len(mem) < HEADER_BYTES:
            raise ValueError(f"{where}: truncated ({len(mem)} bytes)")
        head = np.frombuffer(mem, dtype="<i8", count=HEADER_BYTES // 8)
        fixed = head[:_FIXED].tolist()  # read once: another process may change them meanwhile
        if fixed[W_MAGIC] & 0xFFFFFFFF != MAGIC:
            raise ValueError(f"{where}: not a streamscope ring (bad magic)")
        self.probe, self.kind = fixed[W_PROBE], fixed[W_KIND]
        self.capacity, self.pid, self.flags = fixed[W_CAPACITY], fixed[W_PID], fixed[W_FLAGS]
        if not (0 <= self.probe < 1 << 32 and 0 <= self.kind < 1 << 32 and self.pid > 0):
            raise ValueError(f"{where}: not a streamscope ring (bad header)")
        try:
            check_capacity(self.capacity)
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
        if len(mem) < ring_bytes(self.capacity):
            raise ValueError(f"{where}: truncated ({len(mem)} bytes)")
        self._head = head
        self._fixed = fixed
        self._slots = np.frombuffer(
            mem, dtype=RECORD_DTYPE, count=self.capacity, offset=HEADER_BYTES
        )
        #: The read position is this reader's own: kept here, and only copied to the ring for
        #: the writer (a copy another process overwrote is put back, never believed).
        self._r = int(head[W_R])
        #: Records read before it was opened (0 where the positions are not sound: the first
        #: drain finds that out).
        self._r0 = self._r if 0 <= self._r <= int(head[W_W]) else 0
        self._taken = 0  # records copied out since it was opened
        self._seen_dropped = self._refusals = 0
        #: What was found wrong with the ring so far, by what (``POSITIONS``, ...): drops and
        #: incidents (a word found overwritten counts once until it is seen sound again).
        self.damage: dict[str, int] = {}
        self._bad: dict[str, int] = {}  # the value an overwritten word was last seen with
        #: Written by another process: what this one has read, it need not keep resident.
        self._remote = self.pid != os.getpid()

    @classmethod
    def open(cls, path: str | Path) -> RingReader:
        fd = os.open(path, os.O_RDWR)
        try:
            size = file_size(fd)
            if size < HEADER_BYTES:
                raise ValueError(f"{path}: truncated ({size} bytes)")
            mem = map_shared(fd, size, guard=native)  # truncated under it: zeros, not SIGBUS
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
        """The writer is done with the ring (it may still hold records to drain); a closed
        word that is neither 0 nor 1 was overwritten, and the ring is taken as open."""
        c = int(self._head[W_CLOSED])
        if c in (0, 1):
            self._bad.pop(CLOSED_WORD, None)
            return c == 1
        self._found(CLOSED_WORD, c)
        return False

    @property
    def written(self) -> int:
        """Records the writer wrote that this reader took or may take (a count the ring's
        write position gives only while it was never overwritten)."""
        return self._r0 + self._taken + self.pending

    @property
    def pending(self) -> int:
        """Records written and not drained yet; 0 while the positions are out of bounds (the
        next drain counts that, and moves on)."""
        n = (native.load_acquire(self._mem, W_W) - self._r) & _U64
        return n if n <= self.capacity else 0

    def ticks_at(self, k: int) -> int:
        """Ticks of the ``k``-th record not drained yet (0: the oldest; ``k`` < ``pending``)."""
        return int(self._slots[(self._r + k) & (self.capacity - 1)]["ticks"])

    def _found(self, what: str, value: int | None = None) -> None:
        """Count ``what`` found wrong; ``value``: the word as found, counted once until it
        changes or is seen sound (a word left overwritten is one incident, not one a drain)."""
        if value is not None:
            if self._bad.get(what) == value:
                return
            self._bad[what] = value
        self.damage[what] = self.damage.get(what, 0) + 1

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
        # The cost words before ``w``: a writer counts an event's cost after the event, so
        # what they say is within what the positions read next allow (``_cost``).
        cost_ns, cost_n = self._head[W_COST_NS : W_COST_N + 1].tolist()
        w = native.load_acquire(self._mem, W_W)  # see the docstring
        h = self._head[:_WORDS].tolist()  # every other word, read once, then checked
        if h[:_FIXED] != self._fixed:
            self._found(HEADER)
            if self.address and native.mapping_faulted(self.address):
                self._found(TRUNCATED, 0)  # what is past the file's end reads as zeros now
            if self._head.flags.writeable:
                self._head[:_FIXED] = self._fixed
        r = self._r
        if h[W_R] != r:
            self._found(READ_POSITION)
            native.store_release(self._mem, W_R, r)
        cap = self.capacity
        n = (w - r) & _U64
        if n > cap:
            # Not what one writer can have written since the last drain: the slots' contents
            # are unknown. Read on from where the writer writes now (the ring has room again).
            self._found(POSITIONS)
            self._r = r = w
            native.store_release(self._mem, W_R, r)
            n = 0
        partial = False
        if limit is not None and n > max(limit, 0):
            partial, n = True, max(limit, 0)
        left: int | None = None
        if n > 0:
            a = r & (cap - 1)
            b = a + n
            if b <= cap:
                out = self._slots[a:b].copy()
            else:
                out = np.concatenate((self._slots[a:cap], self._slots[: b - cap]))
            if partial:
                left = int(self._slots[(r + n) & (cap - 1)]["ticks"])
            self._r = _wrapped(r + n)
            self._taken += n
            native.store_release(self._mem, W_R, self._r)
            if self._remote:
                self._release(a, n)
        else:
            out = empty_records()
        delta = 0
        since = h[W_DROPPED] - self._seen_dropped
        if not partial:
            # Refusals are reported with the drain that empties the ring: after every record
            # they followed.
            self._seen_dropped = h[W_DROPPED]
            if 0 <= since <= LEAP:
                delta = since
                self._refusals += delta
            else:
                self._found(REFUSALS)
            since = 0
        sound = since if 0 <= since <= LEAP else 0
        events = self._r0 + self._taken + ((w - self._r) & _U64) + self._refusals + sound
        cost_ns, cost_n = self._cost(cost_ns, cost_n, events)
        return Drained(out, delta, cost_ns, cost_n, h[W_TOTAL], h[W_LAST], left, h[W_REFUSED])

    def _dropped(self) -> int:
        """Refusals counted so far, with those since the last look where the count is sound."""
        since = int(self._head[W_DROPPED]) - self._seen_dropped
        return self._refusals + (since if 0 <= since <= LEAP else 0)

    def _cost(self, ns: int, n: int, events: int) -> tuple[int, int]:
        """The sampled cost words as read, (ns, events timed), or (0, 0) where they cannot be
        those of a writer of ``events`` events (negative, more timed than one in
        ``SAMPLE_EVERY``, an hour or more per event): one incident while they stay so. Each
        overwritten position or refusal count the writer went on from may have timed one
        more."""
        jumps = self.damage.get(POSITIONS, 0) + self.damage.get(REFUSALS, 0)
        if 0 <= n <= events // SAMPLE_EVERY + 1 + jumps and 0 <= ns <= n * _HOUR_NS:
            self._bad.pop(COST, None)
            return ns, n
        self._found(COST, 0)
        return 0, 0

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
        """The ring's counts now, as far as they can be trusted: records taken or pending,
        refusals counted (and those since the last drain, where the count is sound)."""
        head = self._head
        cost_ns, cost_n = head[W_COST_NS : W_COST_N + 1].tolist()  # first, as in ``drain``
        written = self.written
        dropped = self._dropped()
        cost_ns, cost_n = self._cost(cost_ns, cost_n, written + dropped)
        return Stats(written, dropped, cost_ns, cost_n, int(head[W_TOTAL]), int(head[W_LAST]))

    def close(self) -> None:
        """Let go of the ring: unmapped once the records copied out of it are let go too."""
        with contextlib.suppress(BufferError, ValueError):
            self._mem.close()
