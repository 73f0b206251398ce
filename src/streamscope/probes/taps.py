"""Taps: one probe's ring, and the recorder that makes a process's rings.

In: a probe id, its record kind and the clock its process reads. Out: a ``RingTap`` whose
``ring`` (``core.native.Ring``) the hot path writes: one clock read and one fixed record, or one
counted refusal when the ring is full. A published ring lives in the run's ring directory, where
the monitor finds and drains it; a private one is drained in this process (a device's agent, a
test). Nothing here converts time, formats or sends anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from streamscope.core import forksafe, native
from streamscope.core.options import DEFAULT_TAP_CAPACITY
from streamscope.core.rings import W_FLAGS, anonymous_ring, close_ring, create_ring_file
from streamscope.core.slabs import slab_ring

if TYPE_CHECKING:  # reading a ring back is the monitor's (and an inline run's): numpy's
    from streamscope.core.records import Records
    from streamscope.transport.ringreader import RingReader

#: Default records per ring (a power of two, ``RunOptions.tap_capacity``'s): at one drain
#: every 20 ms, a tap may record 3 M events per second before it refuses any.
DEFAULT_CAPACITY = DEFAULT_TAP_CAPACITY

#: How a probe's ring is written, for its run's overhead estimate (``W_FLAGS`` of the ring):
#: inside native code only, or by Python code that calls it (the call costs extra, measured by
#: the monitor per class; see ``probes.cost``).
COST_NATIVE = 0
COST_CALL = 1
COST_INTERVAL = 2
COST_SAMPLER = 3
COST_CENTRAL = 4
COST_TRACE = 5
COST_COUNTER = 6
COST_NAMES = ("native", "call", "interval", "sampler", "central", "trace", "counter")

#: The host clock of each probe-core implementation (native or twin), made once per process:
#: every tap in the process reads the same monotonic clock, and making one is not free.
_host_clocks: dict[int, native.Clock] = {}


def host_clock() -> native.Clock:
    """The host's monotonic clock as a probe-core clock (one per implementation)."""
    clock = _host_clocks.get(id(native.Clock))
    if clock is None:
        clock = _host_clocks[id(native.Clock)] = native.Clock()
    return clock


class Tap(Protocol):
    """What a local drainer (a device's agent) needs from a tap."""

    probe: int
    kind: int

    @property
    def refused(self) -> int:
        """The value of the latest record refused (a channel end's sequence number)."""
        ...

    def drain(self) -> tuple[Records, int]:
        """Records written since the last drain, and how many were refused meanwhile."""
        ...


class RingTap:
    """One probe's ring. ``ring`` is the hot path's; ``drain`` is for a private ring's reader."""

    __slots__ = ("_reader", "kind", "mem", "probe", "published", "ring")

    def __init__(
        self,
        probe: int,
        kind: int,
        capacity: int = DEFAULT_CAPACITY,
        *,
        clock: native.Clock | None = None,
        directory: str | None = None,
        cost: int = COST_NATIVE,
        slab: bool = False,
    ) -> None:
        """``slab``: a published ring is a slot of a slab file (``core.slabs``), not a file of
        its own."""
        self.probe = int(probe)
        self.kind = int(kind)
        if directory is None:
            self.mem = anonymous_ring(self.probe, self.kind, capacity, flags=cost)
        else:
            make = slab_ring if slab else create_ring_file
            self.mem = make(directory, self.probe, self.kind, capacity, flags=cost)
        self.published = directory is not None
        self.ring = native.Ring(self.mem, clock if clock is not None else host_clock())
        self._reader: RingReader | None = None

    def record(self, ticks: int, value: int) -> bool:
        """Keep one record taken at ``ticks``; False (and counted) when the ring is full."""
        return self.ring.record_at(ticks, value)

    @property
    def w(self) -> int:
        return self.ring.written

    @property
    def dropped(self) -> int:
        return self.ring.dropped

    @property
    def cap(self) -> int:
        return self.ring.capacity

    @property
    def refused(self) -> int:
        return self.ring.refused

    def drain(self) -> tuple[Records, int]:
        """What was written since the last drain (a private ring only: the monitor drains a
        published one, and a ring has one reader)."""
        if self.published:
            raise RuntimeError(f"probe {self.probe}: a published ring is the monitor's to drain")
        if self._reader is None:
            from streamscope.transport.ringreader import RingReader

            self._reader = RingReader(self.mem)
        d = self._reader.drain()
        return d.records, d.dropped

    def cost_class(self) -> int:
        return int(native.load_acquire(self.mem, W_FLAGS))


def make_tracker(name: str, tap: RingTap | None, cpu: bool = True) -> native.StateTracker:
    """A stage's state tracker writing into ``tap`` (None: it tracks without recording);
    ``cpu``: its thread's CPU time is the worker's (not an event loop's, shared by tasks)."""
    return native.StateTracker(name, tap.ring if tap is not None else None, cpu)


class Recorder:
    """Makes one process's taps, all reading that process's clock: published in the run's
    ring directory (``directory``; the monitor drains them) or private (``directory`` None);
    ``slab``: published as slots of slab files (a process making rings by the hundred)."""

    def __init__(
        self,
        directory: str | None = None,
        clock: native.Clock | None = None,
        capacity: int = DEFAULT_CAPACITY,
        *,
        slab: bool = False,
    ) -> None:
        self.directory = directory
        self.slab = slab
        self.clock = clock if clock is not None else host_clock()
        self.capacity = capacity
        #: The taps in use, in the order made (a dict as an ordered set: a retired one goes in
        #: the time it takes, however many there are).
        self._taps: dict[RingTap, None] = {}
        self._lock = forksafe.lock()

    @property
    def taps(self) -> list[RingTap]:
        with self._lock:
            return list(self._taps)

    def retire(self, tap: RingTap) -> None:
        """``tap`` records nothing more: its ring is closed (the monitor drains what is left,
        then removes it) and let go of here (its memory goes with the last reference)."""
        with self._lock:
            self._taps.pop(tap, None)
        if tap.published:
            close_ring(tap.mem)

    def tap(
        self,
        probe: int,
        kind: int,
        *,
        capacity: int | None = None,
        publish: bool = True,
        cost: int = COST_NATIVE,
    ) -> RingTap:
        tap = RingTap(
            probe,
            kind,
            self.capacity if capacity is None else capacity,
            clock=self.clock,
            directory=self.directory if publish else None,
            cost=cost,
            slab=self.slab,
        )
        with self._lock:
            self._taps[tap] = None
        return tap

    def tracker(
        self, name: str, probe: int, kind: int, *, cost: int = COST_NATIVE
    ) -> native.StateTracker:
        return make_tracker(name, self.tap(probe, kind, cost=cost))
