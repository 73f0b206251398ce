"""The RTL device: an emulated device whose probes *are* the probe cores, simulated cycle by cycle
and read over a register link exactly as a host reads real hardware.

In: a device's sampler offers (ticks, value, hardware cycle) from its stage threads, and its
clock. Out: the same rings the Python probes fill (``probes.storage``), but every sample in them
was written by the storage core's arbiter and popped from its buffer over the link, and every
refusal is the core's own count (contention, overflow) read from its registers; and a clock
that answers calibration round trips from the timestamp core.

The simulation runs only when the device does something: the cycles of each offer, and after it
the idle cycles the arbiter needs to empty its hold registers (``probes * hold``; any later idle
cycle changes nothing in a storage core), at the cycles the device's model gives. The storage
core is built with its ``run`` input, high in every cycle played for the design: the host reads
the buffer over the link between two of them (when it may be half full, or now and then), in
bus cycles that are no cycle of the design, as a real host reads beside the design, so that
reading changes no grant, write or drop. A sample's stamp is the core's cycle; the host turns
it back into the device clock's ticks at its offer (on real hardware the two are one counter).
The timestamp core's counter is kept at the device clock's pace by its ``warp`` input (the
cycles the simulation skips), so a round trip reads the clock the device's other probes read.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from streamscope.core.errors import ConfigError
from streamscope.core.records import Kind
from streamscope.hw.link import Registers
from streamscope.hw.reader import StorageReader, TimestampReader
from streamscope.hw.regmap import RegisterBank
from streamscope.hw.sim import SimulatedLink
from streamscope.hw.storage import CentralStorageCore, DistributedStorageCore
from streamscope.hw.timestamp import Timestamp
from streamscope.probes.taps import COST_CENTRAL, COST_SAMPLER, Recorder, RingTap

#: The bits of a sample's value (a signed 64-bit register) and of a core's cycle stamp.
VALUE_BITS = 64
STAMP_BITS = 32
_STAMP_MASK = (1 << STAMP_BITS) - 1
_NO_CYCLE = -(1 << 63)
#: The most samples a storage core's buffer holds (block RAM); the host reads it when half full.
CORE_CAPACITY = 1024
#: Seconds between two read-outs of a storage core's buffer (sooner when it may be half full).
READ_EVERY_S = 0.02


def make_link(bank: RegisterBank, sim: str) -> Any:
    """``bank`` simulated by ``sim``: ``amaranth`` (``hw.sim.SimulatedLink``) or ``verilator``
    (``hw.verilated.VerilatedLink``, built first)."""
    if sim == "verilator":
        from streamscope.hw.verilated import VerilatedLink

        return VerilatedLink(bank)
    if sim != "amaranth":
        raise ConfigError(f"no simulator {sim!r} for an RTL device: 'amaranth' or 'verilator'")
    return SimulatedLink([bank])


class DeviceClock(Protocol):
    """What the timestamp core keeps pace with: a device clock (``timebase.emulated``)."""

    domain: str

    def now_ticks(self) -> int: ...


class RtlClock:
    """A device clock read from the simulated timestamp core: each reading first runs the core
    to the device clock's present (one cycle, its ``warp`` the cycles skipped), then writes a
    calibration request and reads the answer, over the link. A clock for ``serve_clock``."""

    def __init__(self, clock: DeviceClock, *, sim: str = "amaranth") -> None:
        self._clock = clock
        self.domain = clock.domain
        core = Timestamp(width=64, warp_width=64)
        self.bank = RegisterBank(core, core.EVENTS)
        self._warp = self.bank.warp  # the design's input, a port of the bank
        self.link = make_link(self.bank, sim)
        self._reader = TimestampReader(Registers(self.link, self.bank.registers))
        self._warped = 0
        self._lock = threading.Lock()

    def now_ticks(self) -> int:
        with self._lock:
            target = self._clock.now_ticks()
            count = self.link.cycles + self._warped  # the counter as the next cycle starts
            warp = max(target - count - 1, 0)
            self.link.play([[(self._warp, warp)]])
            self._warped += warp
            return self._reader.now()  # the count in the request's cycle: ``target`` itself

    def close(self) -> None:
        self.link.close()


class _Port:
    """One probe's write port into an ``RtlStorage``: what ``SamplerProbe`` offers to."""

    __slots__ = ("index", "kind", "probe", "storage", "tap")

    def __init__(self, storage: RtlStorage, index: int, probe: int, tap: RingTap) -> None:
        self.storage, self.index, self.probe, self.tap = storage, index, probe, tap
        self.kind = storage.kind

    def offer(self, ticks: int, value: int, cycle: int | None = None) -> bool:
        """Hand a sample taken at ``ticks`` in hardware ``cycle`` to the core. True: it reached
        the core (which may still refuse it, counted); False: the probe already offered in
        this cycle (the core takes one sample a probe a cycle; counted as contention)."""
        return self.storage.offer(self.index, ticks, value, cycle)

    @property
    def written(self) -> int:
        return self.storage.counts[self.index][0]

    @property
    def contention(self) -> int:
        return self.storage.counts[self.index][1]

    @property
    def overflow(self) -> int:
        return self.storage.counts[self.index][2]

    @property
    def refused(self) -> int:
        return self.contention + self.overflow


class RtlStorage:
    """A device's sample storage as a simulated core: ``centralized`` (one buffer, ``ports``
    writes a cycle, a hold register of ``hold`` per probe) or ``distributed`` (a buffer per
    probe). The same interface and rings as ``probes.storage``'s storages, ``capacity`` records
    each between two sends of the device's agent, as theirs; the core's buffers hold
    ``capacity`` samples too, at most ``CORE_CAPACITY`` (block RAM), and the host reads them
    into the rings when they may be half full. The core is made when the first sample comes,
    for the probes registered by then."""

    def __init__(
        self,
        scheme: str,
        kind: Kind = Kind.SAMPLE,
        *,
        capacity: int,
        ports: int = 2,
        hold: int = 1,
        cycle_ticks: int = 1,
        recorder: Recorder | None = None,
        sim: str = "amaranth",
    ) -> None:
        if scheme not in ("centralized", "distributed"):
            raise ConfigError(f"unknown storage scheme {scheme!r} for an RTL device")
        if scheme == "centralized" and (ports & (ports - 1) or ports > capacity):
            raise ConfigError(
                f"an RTL device's central storage has a memory per write port: ports must be a "
                f"power of two at most its capacity (got ports={ports}, capacity={capacity})"
            )
        self.scheme, self.kind, self.sim = scheme, int(kind), sim
        self.capacity, self.ports, self.hold, self.cycle_ticks = capacity, ports, hold, cycle_ticks
        #: The core's buffer: as large as the rings, within what block RAM holds.
        self.core_capacity = min(capacity, CORE_CAPACITY)
        self._recorder = recorder if recorder is not None else Recorder()
        self.lock = threading.Lock()
        self._ports: list[_Port] = []
        self._shared: RingTap | None = None
        self._core: Any = None
        self.link: Any = None
        self._reader: StorageReader | None = None
        self._cycle = _NO_CYCLE  # the model cycle being gathered
        self._row: dict[int, tuple[int, int]] = {}  # its offers: port -> (value, ticks)
        #: (design cycle, port) -> the offer's ticks, oldest first, while it may be in the core.
        self._ticks: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._design = 0  # design cycles played (the core's ``now``, unwrapped)
        self._pending = False  # a hold register may hold a sample
        self._unread = 0  # samples offered since the last read-out
        self._inflight: list[int] = []  # ticks of offers waiting for the lock
        self._row_floor: int | None = None  # the oldest ticks in the gathered row
        self._floor: int | None = None  # the oldest ticks in the core, not yet read out
        self._read_at = time.monotonic()
        self._twice = [0]
        #: Per port: (written, contention, overflow), as last read from the core (plus the
        #: samples it could not take: a second in one cycle, counted as contention).
        self.counts: list[tuple[int, int, int]] = []
        self._seen: list[tuple[int, int]] = []  # per port: refusals already passed to its tap

    def port(self, probe: int) -> _Port:
        """Register probe ``probe`` (before the first sample) and return its port."""
        with self.lock:
            if self._core is not None:
                raise ConfigError(f"probe {probe}: the RTL storage's core is already built")
            if any(p.probe == probe for p in self._ports):
                raise ValueError(f"probe {probe} already has a port on this storage")
            rec = self._recorder
            if self.scheme == "centralized":
                if self._shared is None:
                    self._shared = rec.tap(probe, self.kind, capacity=self.capacity,
                                           publish=False, cost=COST_CENTRAL)  # fmt: skip
                tap = rec.tap(probe, self.kind, capacity=0, publish=False, cost=COST_CENTRAL)
            else:
                tap = rec.tap(probe, self.kind, capacity=self.capacity, publish=False,
                              cost=COST_SAMPLER)  # fmt: skip
            p = _Port(self, len(self._ports), probe, tap)
            self._ports.append(p)
            return p

    def taps(self) -> list[RingTap]:
        """Its rings: private ones, for the device's agent to send (``hold_ticks`` holds the
        agent's watermark back to the samples still in the core)."""
        shared = [self._shared] if self._shared is not None else []
        return [*shared, *(p.tap for p in self._ports)]

    def hold_ticks(self) -> int | None:
        """The ticks of the oldest sample offered and not yet in a ring (None: none), after
        reading the core out if it is free and its hold registers are empty: a sample reaches
        its ring only when the host reads the core, long after its ticks, and must not arrive
        late. Never waits for a stage's offer (the agent's thread calls it)."""
        if self.lock.acquire(blocking=False):
            try:
                if self._core is not None and self._unread:
                    self._read_out()
            finally:
                self.lock.release()
        # Read without the lock: a sample moves from one of these to the next before it
        # leaves the first (in flight -> gathered row -> in the core -> in a ring).
        held = [*self._inflight, self._row_floor, self._floor]
        marks = [t for t in held if t is not None]
        return min(marks) if marks else None

    def _build(self) -> None:
        n = len(self._ports)
        if self.scheme == "centralized":
            core: Any = CentralStorageCore(
                n,
                VALUE_BITS,
                STAMP_BITS,
                self.core_capacity,
                self.ports,
                self.hold,
                32,
                run_input=1,
            )
        else:
            core = DistributedStorageCore(
                n, VALUE_BITS, STAMP_BITS, self.core_capacity, 32, run_input=1
            )
        bank = RegisterBank(core, core.EVENTS)
        self._core = bank  # the design's inputs: ports of the bank
        self.link = make_link(bank, self.sim)
        scheme = "central" if self.scheme == "centralized" else "distributed"
        self._reader = StorageReader(Registers(self.link, bank.registers), scheme, n, VALUE_BITS)
        self.counts = [(0, 0, 0)] * n
        self._seen = [(0, 0)] * n
        self._twice = [0] * n

    def offer(self, index: int, ticks: int, value: int, cycle: int | None) -> bool:
        if not -(1 << 63) <= value < 1 << 63:
            raise OverflowError(f"sample {value} does not fit in 64 bits")
        c = ticks // self.cycle_ticks if cycle is None else cycle
        inflight = self._inflight
        inflight.append(ticks)  # held from now on (the agent may flush while this waits)
        with self.lock:
            try:
                if self._core is None:
                    self._build()
                if c > self._cycle:
                    self._advance(c)
                if index in self._row:
                    self._twice[index] += 1
                    self._ports[index].tap.ring.refuse(1)
                    return False
                self._row[index] = (value, ticks)
                rf = self._row_floor
                self._row_floor = ticks if rf is None or ticks < rf else rf
                return True
            finally:
                inflight.remove(ticks)

    def _drain_cycles(self) -> int:
        """Design cycles after which a sample offered has left its hold register."""
        return len(self._ports) * self.hold if self.scheme == "centralized" else 0

    def _advance(self, c: int) -> None:
        """Run the gathered cycle, then the idle cycles before ``c`` that can matter; read the
        buffer out when it may be half full, or now and then. Call with ``lock`` held."""
        assert self.link is not None
        drain = self._drain_cycles()
        run = (self._core.run, 1)
        rows: list[list[tuple[Any, int]]] = []
        if self._row:
            row = [run]
            for i, (value, ticks) in self._row.items():
                row += [(self._core.offer[i], 1), (self._core.value[i], value & ((1 << 64) - 1))]
                self._ticks[(self._design, i)] = ticks
            rows.append(row)
            self._unread += len(self._row)
            f, rf = self._floor, self._row_floor
            self._floor = rf if f is None or (rf is not None and rf < f) else f
            self._row = {}
            self._row_floor = None
            self._pending = drain > 0
        gap = c - self._cycle - 1 if self._cycle != _NO_CYCLE else 0
        idle = min(gap, drain) if self._pending else 0
        rows += [[run] for _ in range(idle)]
        self.link.play(rows)
        self._design += len(rows)
        self._cycle = c
        if not self._pending or gap >= drain:
            self._pending = False  # the arbiter has emptied the hold registers
        # Read as a host polls: when the buffer may be half full, or now and then.
        if self._unread and (
            self._unread >= self.core_capacity // 2
            or time.monotonic() - self._read_at >= READ_EVERY_S
        ):
            self._read_out()

    def _read_out(self) -> None:
        """Pop every sample the core holds into the rings (a full ring refuses and counts, as
        ``probes.storage``'s do), then take the core's drop counts (as a host reads real
        hardware: ``hw.reader``)."""
        self._unread = 0
        self._read_at = time.monotonic()
        reader = self._reader
        assert reader is not None
        ports = self._ports
        ring = self._shared.ring if self._shared is not None else None
        now = self._design
        for i, stamp, value in reader.samples():
            # The design cycle the sample was offered in: the latest one with its stamp's bits.
            ticks = self._ticks.pop((now - ((now - stamp) & _STAMP_MASK), i))
            if ring is None:
                ports[i].tap.ring.record_at(ticks, value)  # (a full ring counts its refusal)
            elif not (ring.free() > 0 and ring.write(self.kind, ports[i].probe, ticks, value)):
                ports[i].tap.ring.refuse(1)  # the host's ring is full: lost here, counted
        # The buffer is empty now: every sample offered before the last ``drain`` design
        # cycles (the arbiter's round: twice, to spare) and not read was refused (contention or
        # overflow, counted below); the later ones may still wait in their hold registers.
        left = self._ticks
        oldest = now - 2 * self._drain_cycles() - 1
        while left and next(iter(left))[0] < oldest:
            left.popitem(last=False)
        self._floor = min(left.values()) if left else None
        for i, (p, d) in enumerate(zip(ports, reader.drops(), strict=True)):
            self.counts[i] = (d.written, d.contention + self._twice[i], d.overflow)
            seen_c, seen_o = self._seen[i]
            new = (d.contention - seen_c) + (d.overflow - seen_o)
            if new:
                p.tap.ring.refuse(new)
            self._seen[i] = (d.contention, d.overflow)

    def settle(self) -> None:
        """End of run: run the last cycle and the arbiter's idle cycles, read everything out."""
        with self.lock:
            if self._core is None:
                return
            end = self._cycle + len(self._ports) * self.hold + 1
            self._advance(end)
            self._read_out()

    def close(self) -> None:
        if self.link is not None:
            self.link.close()

    def __repr__(self) -> str:
        return (
            f"RtlStorage({self.scheme}, capacity={self.capacity}, ports={self.ports}, "
            f"hold={self.hold}, probes={[p.probe for p in self._ports]})"
        )
