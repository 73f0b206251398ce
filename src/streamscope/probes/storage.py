"""Where hardware-style probes store their samples: one shared buffer, or one buffer per probe.

In: ``offer(ticks, value, cycle)`` per sample, from the stage threads of one resource.
Out: rings (from the process's ``Recorder``: the monitor drains them); every sample is either
written (and drained once) or counted refused at its own probe, as a *contention* drop
(centralised: its hold register was still waiting for the arbiter) or an *overflow* drop (the
buffer was full). DeVille, Troxel & George 2005, §3.2 and §5.2.
"""

from __future__ import annotations

from collections import deque

from streamscope.core import forksafe
from streamscope.core.records import Kind
from streamscope.probes.taps import COST_CENTRAL, COST_SAMPLER, Recorder, RingTap

#: Default records per buffer between two drains (power of two).
DEFAULT_STORAGE_CAPACITY = 4096

#: Scheme names accepted by :func:`make_storage`, by the canonical name they stand for.
_SCHEMES = {
    "centralized": "centralized",
    "centralised": "centralized",
    "central": "centralized",
    "distributed": "distributed",
}

#: Keyword parameters of each scheme.
_PARAMS = {
    "centralized": ("capacity", "ports", "hold", "cycle_ticks"),
    "distributed": ("capacity",),
}

_NO_CYCLE = -(1 << 63)
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1


def _check_capacity(capacity: int) -> None:
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(f"storage capacity must be a power of two, got {capacity}")


class CentralPort:
    """One probe's write port into a :class:`CentralStorage`: a hold register of ``hold``
    samples waiting for the arbiter.

    Its ``tap`` is a register with no records (they go into the shared buffer) that counts the
    port's refused samples (contention plus overflow). Counters are running totals: after
    :meth:`CentralStorage.settle`, ``offered == written + contention + overflow``.
    """

    __slots__ = (
        "_storage",
        "contention",
        "held",
        "kind",
        "offered",
        "overflow",
        "probe",
        "tap",
        "written",
    )

    def __init__(self, storage: CentralStorage, probe: int, tap: RingTap) -> None:
        self._storage = storage
        self.probe = probe
        self.kind = storage.kind
        self.tap = tap
        #: The hold register: (ticks, value) of samples taken and not yet granted, oldest first.
        self.held: deque[tuple[int, int]] = deque()
        self.offered = 0
        self.written = 0
        self.contention = 0
        self.overflow = 0

    def offer(self, ticks: int, value: int, cycle: int | None = None) -> bool:
        """Take a sample at ``ticks`` during hardware ``cycle`` (``ticks // cycle_ticks`` when
        None). True: held, and it will be written (or count as an overflow drop when granted
        into a full buffer); False: refused because the hold register is full (contention)."""
        if not _I64_MIN <= value <= _I64_MAX:
            # Refuse here, in the caller's thread: at grant time it would fail in another's.
            raise OverflowError(f"probe {self.probe}: sample {value} does not fit in 64 bits")
        st = self._storage
        c = ticks // st.cycle_ticks if cycle is None else cycle
        with st.lock:
            self.offered += 1
            if c > st.cycle:
                if st.pending:
                    st._grant_until(c)
                st.cycle = c
            held = self.held
            if len(held) < st.hold:
                held.append((ticks, value))
                st.pending += 1
                return True
            self.contention += 1
            self.tap.ring.refuse(1)
            return False

    @property
    def refused(self) -> int:
        return self.contention + self.overflow

    def __repr__(self) -> str:
        return (
            f"CentralPort(probe={self.probe}, offered={self.offered}, written={self.written}, "
            f"contention={self.contention}, overflow={self.overflow}, held={len(self.held)})"
        )


class CentralStorage:
    """One shared buffer with ``ports`` write ports per clock cycle and a round-robin arbiter.

    At each cycle the arbiter first grants up to ``ports`` held samples, at most one per probe,
    visiting probes in registration order starting after the last probe granted; each granted
    sample is written with the ticks at which it was taken. Then samples taken during that cycle
    enter their probe's hold register, or are refused when it is full. So a sample taken at cycle
    ``c`` is written at cycle ``c + 1`` at the earliest. The arbiter runs lazily: an offer at a
    later cycle first runs the grants of every cycle since the last one seen (stopping early
    when nothing is held). Cycles never go backwards: an earlier cycle counts as the current one.

    Offers may come from several threads (the stages of one resource): the offer and grant path
    holds ``lock``, so the shared ring has one writer at a time. ``capacity`` is the shared
    buffer's size in records between two drains. Its rings come from ``recorder`` (private
    ones when None).
    """

    scheme = "centralized"

    def __init__(
        self,
        kind: Kind = Kind.SAMPLE,
        *,
        capacity: int = DEFAULT_STORAGE_CAPACITY,
        ports: int = 2,
        hold: int = 1,
        cycle_ticks: int = 1,
        recorder: Recorder | None = None,
    ) -> None:
        _check_capacity(capacity)
        if ports < 1:
            raise ValueError(f"central storage needs at least one write port, got {ports}")
        if hold < 1:
            raise ValueError(f"a hold register holds at least one sample, got {hold}")
        if cycle_ticks < 1:
            raise ValueError(f"cycle_ticks must be a positive number of ticks, got {cycle_ticks}")
        self.kind = int(kind)
        self.capacity = capacity
        self.ports = ports
        self.hold = hold
        self.cycle_ticks = cycle_ticks
        self.lock = forksafe.lock()
        #: The last cycle whose grants have run.
        self.cycle = _NO_CYCLE
        #: Samples held in all hold registers.
        self.pending = 0
        self._recorder = recorder if recorder is not None else Recorder()
        self._ring: RingTap | None = None  # made with the first port (it names the domain)
        self._ports: list[CentralPort] = []
        self._by_probe: dict[int, CentralPort] = {}
        self._last = -1  # index in _ports of the last probe granted

    def port(self, probe: int) -> CentralPort:
        """Register probe ``probe`` (once) and return its write port."""
        with self.lock:
            if probe in self._by_probe:
                raise ValueError(f"probe {probe} already has a port on this central storage")
            rec = self._recorder
            if self._ring is None:
                self._ring = rec.tap(probe, self.kind, capacity=self.capacity, cost=COST_CENTRAL)
            p = CentralPort(self, probe, rec.tap(probe, self.kind, capacity=0, cost=COST_CENTRAL))
            self._ports.append(p)
            self._by_probe[probe] = p
            return p

    def taps(self) -> list[RingTap]:
        """The shared buffer's tap, then every port's (in registration order)."""
        shared = [self._ring] if self._ring is not None else []
        return [*shared, *(p.tap for p in self._ports)]

    def settle(self) -> None:
        """End of run: grant every held sample, one cycle after another."""
        with self.lock:
            while self.pending:
                self.cycle += 1
                self._grant_cycle()

    def _grant_until(self, c: int) -> None:
        """Run the grants of cycles ``self.cycle + 1 .. c``. Call with ``lock`` held."""
        cyc = self.cycle
        # Each cycle grants at least one held sample, so this runs at most `pending` times.
        while self.pending and cyc < c:
            cyc += 1
            self._grant_cycle()

    def _grant_cycle(self) -> None:
        # A per-probe loop: the arbiter is sequential by nature, and it visits at most every
        # probe once per cycle.
        ports = self._ports
        n = len(ports)
        assert self._ring is not None
        ring = self._ring.ring
        kind = self.kind
        i = self._last
        granted = 0
        for _ in range(n):
            i = i + 1 if i + 1 < n else 0
            p = ports[i]
            if not p.held:
                continue
            ticks, value = p.held.popleft()
            self.pending -= 1
            # One writer (the lock), so room seen here is room at the write.
            if ring.free() > 0 and ring.write(kind, p.probe, ticks, value):
                p.written += 1
            else:
                p.overflow += 1
                p.tap.ring.refuse(1)
            self._last = i
            granted += 1
            if granted == self.ports:
                break

    def __repr__(self) -> str:
        return (
            f"CentralStorage(ports={self.ports}, hold={self.hold}, capacity={self.capacity}, "
            f"probes={[p.probe for p in self._ports]})"
        )


class DistributedPort:
    """One probe's own buffer and write port: a sample is written the cycle it is taken, unless
    the buffer is full (an overflow drop). Single writer, lock-free (see ``core.native.Ring``)."""

    __slots__ = ("probe", "ring", "tap")

    def __init__(self, tap: RingTap) -> None:
        self.tap = tap
        self.ring = tap.ring
        self.probe = tap.probe

    def offer(self, ticks: int, value: int, cycle: int | None = None) -> bool:
        """Write a sample taken at ``ticks``; ``cycle`` is accepted for symmetry and unused."""
        return self.ring.record_at(ticks, value)

    @property
    def contention(self) -> int:
        return 0

    @property
    def overflow(self) -> int:
        return self.ring.dropped

    @property
    def written(self) -> int:
        return self.ring.written

    @property
    def offered(self) -> int:
        return self.ring.written + self.ring.dropped

    def __repr__(self) -> str:
        return (
            f"DistributedPort(probe={self.probe}, written={self.written}, overflow={self.overflow})"
        )


class DistributedStorage:
    """One buffer of ``capacity`` records per probe; nothing is shared, so nothing contends."""

    scheme = "distributed"

    def __init__(
        self,
        kind: Kind = Kind.SAMPLE,
        *,
        capacity: int = DEFAULT_STORAGE_CAPACITY,
        recorder: Recorder | None = None,
    ) -> None:
        _check_capacity(capacity)
        self.kind = kind
        self.capacity = capacity
        self._recorder = recorder if recorder is not None else Recorder()
        self._ports: dict[int, DistributedPort] = {}
        self._lock = forksafe.lock()

    def port(self, probe: int) -> DistributedPort:
        """Register probe ``probe`` (once) and return its own buffer."""
        with self._lock:
            if probe in self._ports:
                raise ValueError(f"probe {probe} already has a port on this distributed storage")
            tap = self._recorder.tap(probe, self.kind, capacity=self.capacity, cost=COST_SAMPLER)
            p = DistributedPort(tap)
            self._ports[probe] = p
            return p

    def taps(self) -> list[RingTap]:
        """Every port's ring, in registration order."""
        return [p.tap for p in self._ports.values()]

    def settle(self) -> None:
        """Nothing waits in a distributed storage."""

    def __repr__(self) -> str:
        return f"DistributedStorage(capacity={self.capacity}, probes={list(self._ports)})"


def make_storage(
    scheme: str, kind: Kind = Kind.SAMPLE, *, recorder: Recorder | None = None, **params: int
) -> CentralStorage | DistributedStorage:
    """A storage of ``scheme`` (``centralized``/``centralised``/``central`` or ``distributed``).

    ``params`` are the scheme's keyword parameters (``capacity`` for both; ``ports``, ``hold``,
    ``cycle_ticks`` for the centralised one).
    """
    canonical = _SCHEMES.get(scheme.strip().lower())
    if canonical is None:
        raise ValueError(
            f"unknown probe storage scheme {scheme!r}; expected 'centralized' or 'distributed'"
        )
    allowed = _PARAMS[canonical]
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"{canonical} storage has no parameter {', '.join(map(repr, unknown))}; "
            f"valid: {', '.join(allowed)}"
        )
    if canonical == "centralized":
        return CentralStorage(kind, recorder=recorder, **params)
    return DistributedStorage(kind, recorder=recorder, **params)
