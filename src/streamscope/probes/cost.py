"""What one probe event costs in this process: measured once per agent, so each run can say how
much time its own monitoring took.

In: the clock the process's probes read. Out: nanoseconds per event for each class of probe,
timed on the very code paths the probes run (a clock read plus the tap's write), net of the
loop that drives them. The figures are estimates for one process on one machine; the run's
``overhead`` table multiplies them by the events each probe recorded or refused.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from streamscope.core.records import Kind, State
from streamscope.probes.storage import CentralStorage
from streamscope.probes.taps import RingTap, StateTracker
from streamscope.probes.tracing import FunctionTracer, TraceTap

#: Cost class of each probe kind (``ProbeInfo.kind``; samplers by their storage).
COST_CLASS: dict[str, str] = {
    "tail": "channel",
    "head": "channel",
    "send": "channel",
    "deliver": "channel",
    "state": "state",
    "iteration": "interval",
    "input_wait": "interval",
    "output_wait": "interval",
    "timer": "interval",
    "sampler": "ring",
    "counter": "counter",
    "trace": "trace",
}


def cost_class(kind: str, storage: str = "") -> str:
    if kind == "sampler" and storage == "centralized":
        return "central"
    return COST_CLASS.get(kind, "ring")


def _per_call(body: Callable[[int], None], n: int, repeats: int) -> float:
    """Best-of ``repeats`` ns per iteration of ``body(n)``, net of an empty loop of ``n``."""

    def empty(k: int) -> None:
        for _ in range(k):
            pass

    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        body(n)
        t1 = time.perf_counter_ns()
        empty(n)
        t2 = time.perf_counter_ns()
        best = min(best, (t1 - t0) - (t2 - t1))
    return max(best / n, 0.0)


def measure_costs(
    now: Callable[[], int] = time.perf_counter_ns, n: int = 1000, repeats: int = 2
) -> dict[str, float]:
    """Nanoseconds per event of each probe class, timed here and now (a few milliseconds)."""
    buf: list[int] = []
    cap = n + 1

    def channel(k: int) -> None:
        # The channel's inlined tap: one clock read and a bounded append, inside its own lock
        # (the lock is the channel's, taken with or without probes, so it is not counted).
        b = buf
        for _ in range(k):
            if len(b) < cap:
                b.append(now())
        b.clear()

    ring = RingTap(0, Kind.SAMPLE, 1 << 12)

    def ringbody(k: int) -> None:
        rec = ring.record
        for i in range(k):
            rec(now(), i)
            ring.r = ring.w  # never full: measure the write, not the refusal

    tracker = StateTracker("cost", RingTap(0, Kind.STATE, 1 << 12), now)
    states = (State.BUSY, State.BLOCKED_OUT)

    def statebody(k: int) -> None:
        set_ = tracker.set
        for i in range(k):
            set_(states[i & 1])
            tracker.tap.r = tracker.tap.w

    def interval(k: int) -> None:
        rec = ring.record
        for _ in range(k):
            t0 = now()
            rec(now(), now() - t0)
            ring.r = ring.w

    central = CentralStorage(Kind.SAMPLE, capacity=1 << 12, ports=1)
    port = central.port(0)
    shared = central.taps()[0]

    def centralbody(k: int) -> None:
        offer = port.offer
        for i in range(k):
            offer(now(), i, i)
            if i & 1023 == 1023:
                shared.drain()
        shared.drain()

    tracer = FunctionTracer(now=now, capacity=4 * n)

    def leaf() -> None:
        pass

    traced_leaf = tracer.instrument(leaf)

    def bare(k: int) -> None:
        for _ in range(k):
            leaf()

    def traced(k: int) -> None:
        tap = TraceTap(0, "cost", 4 * n)
        tracer.bind_tap(tap)
        try:
            for _ in range(k):
                traced_leaf()
        finally:
            tracer.unbind()

    # Two events (enter, exit) per call, net of the call itself.
    trace = max(_per_call(traced, n, repeats) - _per_call(bare, n, repeats), 0.0) / 2

    total = [0]

    def counter(k: int) -> None:
        for _ in range(k):
            total[0] += 1

    return {
        "channel": _per_call(channel, n, repeats),
        "ring": _per_call(ringbody, n, repeats),
        "state": _per_call(statebody, n, repeats),
        "interval": _per_call(interval, n, repeats),
        "central": _per_call(centralbody, n, repeats),
        "counter": _per_call(counter, n, repeats),
        "trace": trace,
    }
