"""What one probe event costs the application: so each run can say how much its monitoring took.

In: the rings' own samples of their recording time (one event in ``core.rings.SAMPLE_EVERY`` is
timed while the run goes on, inside the native core), and, for probes that Python code calls,
what that call adds around the native part, timed once by the monitor on the very code paths the
probes run. Out: a cost model, ns per event of each probe and how it was obtained, that the
run's ``overhead`` table multiplies by each probe's events (kept or refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection

from streamscope.core.records import Kind, State
from streamscope.core.topology import Topology
from streamscope.probes.storage import CentralStorage
from streamscope.probes.taps import (
    COST_CALL,
    COST_CENTRAL,
    COST_COUNTER,
    COST_INTERVAL,
    COST_NAMES,
    COST_NATIVE,
    COST_SAMPLER,
    COST_TRACE,
    RingTap,
    make_tracker,
)
from streamscope.probes.tracing import FunctionTracer, TraceTap
from streamscope.probes.user import CounterProbe, SamplerProbe

#: A ring's samples: (sampled ns, sampled events, events written or refused, cost class).
RingSample = tuple[int, int, int, int]
CostModel = Callable[[int], tuple[float, str]]


def _per_call(
    body: Callable[[int], None],
    n: int,
    repeats: int,
    clock: Callable[[], int] = time.perf_counter_ns,
) -> float:
    """ns per iteration of ``body(n)`` net of an empty loop of ``n``: the best of ``repeats``
    of each, apart. (The best of their differences picked the repeat whose empty loop was
    preempted: beside a busy core a call's extra came out 0 now and then.)"""

    def empty(k: int) -> None:
        for _ in range(k):
            pass

    best, bare = float("inf"), float("inf")
    for _ in range(repeats):
        t0 = clock()
        body(n)
        t1 = clock()
        empty(n)
        t2 = clock()
        best, bare = min(best, t1 - t0), min(bare, t2 - t1)
    return max((best - bare) / n, 0.0)


#: How many times an event's Python extra is timed at most, until the native writes timed
#: within it cost less than the whole event (``net_of_native``).
NATIVE_TRIES = 4


def net_of_native(tap: RingTap, per_event: Callable[[], float]) -> float:
    """ns per event that Python adds to ``tap``'s native writes: ``per_event()`` (the whole
    event, its fastest repeat) less the native writes' mean, as the ring timed them meanwhile.
    The ring times one write in ``core.rings.SAMPLE_EVERY``: a few of them a measure, and one preempted
    by a busy core made the writes' mean dearer than the whole event (its extra read 0, a
    run's Python channel free). Timed again then, ``NATIVE_TRIES`` times at most."""
    ring = tap.ring
    total = native = 0.0
    for _ in range(NATIVE_TRIES):
        ns, n = ring.cost_ns, ring.cost_n
        total = per_event()
        timed = ring.cost_n - n
        native = (ring.cost_ns - ns) / timed if timed > 0 else 0.0
        if native < total:
            break
    return max(total - native, 0.0)


#: A timed loop: ``body(k)`` makes ``k`` probe events (or calls).
Body = Callable[[int], None]
#: Ring capacity of the probes timed (room for every event between drains).
_CAP = 1 << 14


def measure_extras(
    n: int = 2000, repeats: int = 3, classes: Collection[int] | None = None
) -> dict[int, float]:
    """ns per event that Python code adds around the native write, by cost class (a few ms):
    of every class, or of ``classes`` alone (those a run's probes are of: a class no probe of
    the run has costs it nothing, and timing it took the monitor's end 10 ms and more)."""
    wanted = set(range(len(COST_NAMES)) if classes is None else classes) - {COST_NATIVE}

    def per_event(body: Body) -> float:
        return _per_call(body, n, repeats)

    out: dict[int, float] = {COST_NATIVE: 0.0}
    if wanted & {COST_CALL, COST_INTERVAL, COST_SAMPLER}:
        ring = RingTap(1, Kind.SAMPLE, _CAP)
        if COST_CALL in wanted:
            # A ring written from Python (a process channel, a queue shared by processes) or a
            # state change called from Python (a drop-in stage): the dearer of the two.
            states = _state_changes()
            out[COST_CALL] = net_of_native(
                ring, lambda: max(per_event(_ring_records(ring)), per_event(states))
            )
        if COST_INTERVAL in wanted:
            out[COST_INTERVAL] = net_of_native(ring, lambda: per_event(_intervals(ring)))
        if COST_SAMPLER in wanted:
            out[COST_SAMPLER] = net_of_native(ring, lambda: per_event(_samples(ring)))
    if COST_CENTRAL in wanted:
        out[COST_CENTRAL] = per_event(_central_offers())
    if COST_COUNTER in wanted:
        out[COST_COUNTER] = per_event(_counts())
    if COST_TRACE in wanted:
        # Two events (enter, exit) per call, net of the call itself and of the native writes.
        bare, traced, ttap = _traced_calls(n)
        out[COST_TRACE] = net_of_native(ttap, lambda: (per_event(traced) - per_event(bare)) / 2)
    return out


def _ring_records(ring: RingTap) -> Body:
    """Records written to ``ring`` from Python."""

    def call(k: int) -> None:
        rec = ring.ring.record
        for i in range(k):
            rec(i)
        ring.drain()

    return call


def _state_changes() -> Body:
    """A stage's state set back and forth through its tracker."""
    tracker = make_tracker("cost", RingTap(2, Kind.STATE, _CAP))
    states = (State.BUSY, State.BLOCKED_OUT)

    def state(k: int) -> None:
        set_ = tracker.set
        for i in range(k):
            set_(states[i & 1])

    return state


def _intervals(ring: RingTap) -> Body:
    """Intervals timed by two clock reads and recorded at the second into ``ring``."""

    def interval(k: int) -> None:
        now = ring.ring.clock.now
        rec = ring.ring.record_at
        for _ in range(k):
            t0 = now()
            t1 = now()
            rec(t1, t1 - t0)
        ring.drain()

    return interval


def _samples(ring: RingTap) -> Body:
    """A sampler's samples, offered to a port over ``ring`` (distributed storage)."""
    sampler = SamplerProbe("cost", _Port(ring), ring.ring.clock.now)

    def sample(k: int) -> None:
        s = sampler.sample
        for i in range(k):
            s(i)
        ring.drain()

    return sample


def _central_offers() -> Body:
    """Samples offered to central storage's port, its shared ring drained as it fills."""
    central = CentralStorage(Kind.SAMPLE, capacity=_CAP, ports=1)
    port = central.port(3)
    shared = central.taps()[0]

    def centralbody(k: int) -> None:
        offer = port.offer
        for i in range(k):
            offer(i, i, i)
            if i & 1023 == 1023:
                shared.drain()
        shared.drain()

    return centralbody


def _counts() -> Body:
    """A counter probe counting one at a time."""
    counter = CounterProbe("cost", RingTap(4, Kind.COUNT, 0))

    def count(k: int) -> None:
        c = counter.count
        for _ in range(k):
            c(1)

    return count


def _traced_calls(n: int) -> tuple[Body, Body, TraceTap]:
    """Calls of an empty function, bare and traced (room for ``n`` calls' events), and the
    trace tap the traced ones write to."""
    tracer = FunctionTracer(capacity=4 * n)

    def leaf() -> None:
        pass

    traced_leaf = tracer.instrument(leaf)
    ttap = TraceTap(5, "cost", 4 * n)

    def bare(k: int) -> None:
        for _ in range(k):
            leaf()

    def traced(k: int) -> None:
        tracer.bind_tap(ttap)
        try:
            for _ in range(k):
                traced_leaf()
        finally:
            tracer.unbind()
            ttap.drain()

    return bare, traced, ttap


class _Port:
    """A distributed storage port over one ring (what a sampler offers to)."""

    def __init__(self, tap: RingTap) -> None:
        self._rec = tap.ring.record_at

    def offer(self, ticks: int, value: int, cycle: int | None = None) -> bool:
        return self._rec(ticks, value)


class CostBook:
    """The cost model of one run: the rings' sampled native cost per probe, plus the Python
    extra of the probe's class (timed in the monitor's process). It gathers the rings'
    samples as the run goes and times the extras once, when first asked: so it changes."""

    def __init__(self, extras: dict[int, float] | None = None) -> None:
        self._extras = dict(extras) if extras is not None else {}
        self._given = extras is not None
        self._rings: dict[int, RingSample] = {}

    def extras(self, classes: Collection[int]) -> dict[int, float]:
        """The Python extras of ``classes``, each timed on first use (at the end of the run,
        so the monitor's start stays short; a class no probe of the run has, never)."""
        missing = set(classes) - set(self._extras)
        if missing and not self._given:
            self._extras.update(measure_extras(classes=missing))
        return self._extras

    def add_rings(self, samples: dict[int, RingSample]) -> None:
        """The rings' samples so far, per probe (cumulative: the latest replace the earlier)."""
        self._rings.update(samples)

    def native_mean(self) -> float:
        """ns per event of the native writes over every ring (for probes with no sample)."""
        ns = sum(s[0] for s in self._rings.values())
        n = sum(s[1] for s in self._rings.values())
        return ns / n if n else 0.0

    def model(self, topology: Topology) -> CostModel:
        fallback = self.native_mean()
        classes = {p: s[3] for p, s in self._rings.items()}
        storage_class = {
            p.id: COST_CENTRAL if p.storage == "centralized" else COST_SAMPLER
            for p in topology.probes
            if p.kind == "sampler"
        }
        extras = self.extras({*classes.values(), *storage_class.values()})

        def cost(pid: int) -> tuple[float, str]:
            sample = self._rings.get(pid)
            cls = classes.get(pid, storage_class.get(pid, COST_NATIVE))
            if sample is not None and sample[1]:
                native_ns = sample[0] / sample[1]
                how = f"sampled in the run ({sample[1]} events)"
            else:
                native_ns = fallback
                how = "sampled in the run (other probes)"
            extra = extras.get(cls, 0.0)
            if extra:
                how += f" + {COST_NAMES[cls]} call measured by the monitor"
            return native_ns + extra, how

        return cost


__all__ = ["CostBook", "CostModel", "measure_extras"]
