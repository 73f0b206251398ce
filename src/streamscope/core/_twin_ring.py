"""The twin's ring writer (see ``_native.Ring``): fixed records into a shared-memory ring.

In: a ring's buffer (``core.rings`` lays it out), a clock, and values to record. Out: records,
refusals, counts and sampled recording costs in the ring's header words, exactly where and as
the native core writes them, so that a ring written by either is drained alike.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Any

from streamscope.core._twin_clock import Clock, clock_gap_ns
from streamscope.core.records import Kind
from streamscope.core.rings import (
    HEADER_BYTES,
    MAGIC,
    RECORD_BYTES,
    SAMPLE_EVERY,
    W_CAPACITY,
    W_CLOSED,
    W_COST_N,
    W_COST_NS,
    W_DROPPED,
    W_KIND,
    W_LAST,
    W_MAGIC,
    W_PROBE,
    W_R,
    W_REFUSED,
    W_TOTAL,
    W_W,
)

_KIND_ENTER, _KIND_EXIT = int(Kind.ENTER), int(Kind.EXIT)
_KIND_DURATION, _KIND_SAMPLE = int(Kind.DURATION), int(Kind.SAMPLE)
_MASK = SAMPLE_EVERY - 1
_U64 = (1 << 64) - 1
_monotonic_ns = time.monotonic_ns
_gap = clock_gap_ns()


def _wrapped(v: int) -> int:
    """``v`` as a 64-bit word holds it (what the native core's unsigned sums leave)."""
    return ((v + (1 << 63)) & _U64) - (1 << 63)


def _bump(h: Any, word: int, n: int) -> None:
    """Header word ``word`` plus ``n``, wrapping as the native core's does: the header is
    shared memory another process may have overwritten with anything."""
    h[word] = _wrapped(h[word] + n)


def _fits(cap: int, w: int, r: int, need: int) -> bool:
    """``_native_ring.c``'s ``ring_fits``: slots in use are never more than the capacity;
    positions that say otherwise were overwritten, and the ring counts as full."""
    used = (w - r) & _U64
    return used <= cap and cap - used >= need


# A ring forked into a child stays the parent's: the child's writes would race the parent's.
_fork_gen = [0]
os.register_at_fork(after_in_child=lambda: _fork_gen.__setitem__(0, _fork_gen[0] + 1))


class Ring:
    """See ``_native.Ring``: one writer; words of the header are read and written in place."""

    __slots__ = (
        "_calls",
        "_cap",
        "_depth",
        "_gen",
        "_h",
        "_mask",
        "_r_cache",
        "_s",
        "clock",
        "kind",
        "probe",
    )

    def __init__(self, buffer: Any, clock: Clock) -> None:
        if not isinstance(clock, Clock):
            raise TypeError("clock must be a Clock of the same implementation")
        view = memoryview(buffer).cast("B")
        if view.readonly:
            raise TypeError("a ring needs a writable buffer")
        if len(view) < HEADER_BYTES:
            raise ValueError("a ring needs a buffer of at least its 256-byte header")
        h = view[:HEADER_BYTES].cast("q")
        if h[W_MAGIC] & 0xFFFFFFFF != MAGIC:
            raise ValueError(
                "not a streamscope ring (bad magic): make it with streamscope.core.rings"
            )
        cap = h[W_CAPACITY]
        if cap < 0 or cap & (cap - 1) or cap > (len(view) - HEADER_BYTES) // RECORD_BYTES:
            raise ValueError(
                "ring capacity is not a power of two, or the buffer is too small for it"
            )
        self._h = h
        self._s = view[HEADER_BYTES : HEADER_BYTES + cap * RECORD_BYTES].cast("q")
        self._cap = cap
        self._mask = cap - 1 if cap else 0
        self._r_cache = h[W_R]
        self.probe = h[W_PROBE]
        self.kind = h[W_KIND]
        self.clock = clock
        self._gen = _fork_gen[0]
        self._depth = 0
        self._calls: list[int] = []

    def _room(self, w: int, need: int) -> bool:
        cap = self._cap
        used = (w - self._r_cache) & _U64  # ``_fits``, inline: the hot path's
        if used <= cap and cap - used >= need:
            return True
        self._r_cache = self._h[W_R]
        return _fits(cap, w, self._r_cache, need)

    def _store(self, kind: int, probe: int, ticks: int, value: int) -> bool:
        h = self._h
        w = h[W_W]
        if not self._room(w, 1):
            try:
                h[W_REFUSED] = value
            except ValueError:
                raise OverflowError("Python int too large to convert to C long") from None
            _bump(h, W_DROPPED, 1)
            return False
        i = (w & self._mask) * 3
        s = self._s
        try:  # free unless it raises (3.11): a value outside int64 fails as the C core's does
            s[i + 1] = ticks
            s[i + 2] = value
        except ValueError:
            raise OverflowError("Python int too large to convert to C long") from None
        s[i] = kind | ((probe - (1 << 32) if probe >= 1 << 31 else probe) << 32)
        try:
            h[W_W] = w + 1
        except ValueError:  # an overwritten header's: wraps as the native core's
            h[W_W] = _wrapped(w + 1)
        return True

    def service(self, busy: int, cpu: int, runq: int) -> None:
        """An item's service time (``_native_state.c``'s ``tracker_service``): a DURATION and
        two SAMPLE records, all or none, none refused."""
        if self._gen != _fork_gen[0] or not self._room(self._h[W_W], 3):
            return
        ticks = self.clock.now()
        self._store(_KIND_DURATION, self.probe, ticks, busy)
        self._store(_KIND_SAMPLE, self.probe, ticks, cpu)
        self._store(_KIND_SAMPLE, self.probe, ticks, runq)

    def _sampled(self) -> bool:
        h = self._h
        return not (h[W_W] + h[W_DROPPED]) & _MASK

    def _cost(self, t0: int) -> None:
        h = self._h
        _bump(h, W_COST_NS, max(_monotonic_ns() - t0 - _gap, 0))
        _bump(h, W_COST_N, 1)

    def _refused(self, value: int) -> bool:
        if self._room(self._h[W_W], 1):
            return False
        _bump(self._h, W_DROPPED, 1)
        self._h[W_REFUSED] = value
        return True

    def record(self, value: int) -> bool:
        if self._gen != _fork_gen[0]:
            return False
        if not self._sampled():
            if self._refused(value):
                return False
            return self._store(self.kind, self.probe, self.clock.now(), value)
        t0 = _monotonic_ns()
        ok = not self._refused(value) and self._store(
            self.kind, self.probe, self.clock.now(), value
        )
        self._cost(t0)
        return ok

    def record_stamp(self, value: int) -> int:
        """An insertion its item carries the time of: the clock is read whether the record is
        kept or refused (and counted), and returned."""
        sampled = self._sampled()
        t0 = _monotonic_ns() if sampled else 0
        ticks = self.clock.now()
        if self._gen == _fork_gen[0]:
            self._store(self.kind, self.probe, ticks, value)
            if sampled:
                self._cost(t0)
        return ticks

    def record_at(self, ticks: int, value: int) -> bool:
        if self._gen != _fork_gen[0]:
            return False
        if not self._sampled():
            return self._store(self.kind, self.probe, ticks, value)
        t0 = _monotonic_ns()
        ok = self._store(self.kind, self.probe, ticks, value)
        self._cost(t0)
        return ok

    def write(self, kind: int, probe: int, ticks: int, value: int) -> bool:
        if not (0 <= kind <= 0xFFFFFFFF and 0 <= probe <= 0xFFFFFFFF):
            raise OverflowError("kind and probe are 32-bit unsigned")
        if self._gen != _fork_gen[0]:
            return False
        return self._store(kind, probe, ticks, value)

    def free(self) -> int:
        w = self._h[W_W]
        self._room(w, self._cap or 1)
        used = (w - self._r_cache) & _U64
        return self._cap - used if used <= self._cap else 0

    def refuse(self, n: int = 1) -> None:
        if n < 0:
            raise ValueError("refusals only count up")
        if self._gen == _fork_gen[0]:
            _bump(self._h, W_DROPPED, n)

    def add(self, n: int) -> None:
        if self._gen == _fork_gen[0]:
            self._h[W_LAST] = self.clock.now()
            _bump(self._h, W_TOTAL, n)

    def enter(self, fid: int) -> bool:
        if fid <= 0:
            raise ValueError("function ids start at 1")
        calls = self._calls
        if fid >= len(calls):
            n = len(calls) or 64
            while n <= fid:
                n *= 2
            calls.extend([0] * (n - len(calls)))
        calls[fid] += 1
        if self._gen != _fork_gen[0]:
            return False
        sampled = self._sampled()
        t0 = _monotonic_ns() if sampled else 0
        ok = self._room(self._h[W_W], self._depth + 2)
        if ok:
            self._store(_KIND_ENTER, self.probe, self.clock.now(), fid)
            self._depth += 1
        else:
            _bump(self._h, W_DROPPED, 2)
        if sampled:
            self._cost(t0)
        return ok

    def exit(self, fid: int) -> None:
        if self._gen != _fork_gen[0]:
            return
        sampled = self._sampled()
        t0 = _monotonic_ns() if sampled else 0
        self._store(_KIND_EXIT, self.probe, self.clock.now(), fid)
        if self._depth > 0:
            self._depth -= 1
        if sampled:
            self._cost(t0)

    def calls(self) -> list[int]:
        return list(self._calls)

    @property
    def written(self) -> int:
        return int(self._h[W_W])

    @property
    def dropped(self) -> int:
        return int(self._h[W_DROPPED])

    @property
    def read(self) -> int:
        return int(self._h[W_R])

    @property
    def total(self) -> int:
        return int(self._h[W_TOTAL])

    @property
    def refused(self) -> int:
        return int(self._h[W_REFUSED])

    @property
    def last(self) -> int:
        return int(self._h[W_LAST])

    @property
    def cost_ns(self) -> int:
        return int(self._h[W_COST_NS])

    @property
    def cost_n(self) -> int:
        return int(self._h[W_COST_N])

    @property
    def capacity(self) -> int:
        return int(self._cap)

    @property
    def depth(self) -> int:
        return self._depth


def load_acquire(buffer: Any, word: int) -> int:
    return int(memoryview(buffer).cast("B")[: (word + 1) * 8].cast("q")[word])


def store_release(buffer: Any, word: int, value: int) -> None:
    memoryview(buffer).cast("B")[: (word + 1) * 8].cast("q")[word] = value


def astir(addresses: Any, out: Any) -> int:
    """Which rings (their headers' addresses) the monitor must look at: ``out[i]`` = 1 where
    ring ``i`` holds records not drained, was closed, refused records or is a register
    (capacity 0); address 0 is always looked at. Returns how many."""
    addrs = memoryview(addresses).cast("B").cast("Q")
    flags = memoryview(out).cast("B")
    busy = 0
    for i, addr in enumerate(addrs):
        if addr == 0:
            b = True
        else:
            h = (ctypes.c_int64 * (W_R + 1)).from_address(addr)
            b = h[W_W] != h[W_R] or h[W_CLOSED] != 0 or h[W_DROPPED] != 0 or h[W_CAPACITY] == 0
        flags[i] = int(b)
        busy += b
    return busy


def guard_mapping(address: int, size: int) -> None:
    """See ``_native_guard.c``: Python cannot answer a SIGBUS where it happens, so the twin
    guards nothing (a monitor on the twin dies of a ring truncated under it)."""


def unguard_mapping(address: int) -> bool:
    return False


def mapping_faulted(address: int) -> bool:
    return False
