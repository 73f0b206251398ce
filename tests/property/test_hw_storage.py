"""The storage cores (``hw.storage``) against ``probes.storage``: random offers from several
probes, cycle by cycle in Amaranth's simulator; the samples written, in order, and each probe's
contention and overflow drops agree exactly."""

from __future__ import annotations

from typing import Any

from amaranth.sim import Simulator
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from streamscope.core.records import Kind
from streamscope.hw.storage import CentralStorageCore, DistributedStorageCore
from streamscope.probes.storage import CentralStorage, DistributedStorage
from streamscope.probes.taps import Recorder

PROBES = 3
#: Each cycle: which probes offer (a bit each) and the values they offer.
_cycles = st.lists(
    st.tuples(st.integers(0, (1 << PROBES) - 1), st.integers(0, 255)), min_size=8, max_size=80
)
#: Every probe offering every cycle: the arbiter is the bottleneck, holds fill, buffers fill.
SATURATED = [((1 << PROBES) - 1, v) for v in range(24)]


def _offers(cycles: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """Per cycle, (probe, value) of each offer."""
    return [[(i, (v + 37 * i) & 0xFF) for i in range(PROBES) if bits >> i & 1]
            for bits, v in cycles]  # fmt: skip


def _run(
    dut: Any, cycles: list[list[tuple[int, int]]], tail: int, *, reading: bool = False
) -> dict[str, Any]:
    """Drive the core: each cycle's offers, then ``tail`` idle cycles; its counters and every
    sample it holds, oldest first (popped after the run; ``reading``: also popped during it,
    one a cycle, as a host reading while the design writes)."""
    out: dict[str, Any] = {}

    async def bench(ctx: Any) -> None:
        read: list[tuple[int, int, int]] = []
        for offers in [*cycles, *([[]] * tail)]:
            on = dict(offers)
            for i in range(PROBES):
                ctx.set(dut.offer[i], int(i in on))
                ctx.set(dut.value[i], on.get(i, 0))
            if reading and ctx.get(dut.level):
                read.append((ctx.get(dut.head_probe), ctx.get(dut.head_ticks),
                             ctx.get(dut.head_value)))  # fmt: skip
                ctx.set(dut.pop, 1)
            elif reading:
                ctx.set(dut.pop, 0)
            await ctx.tick()
        if reading:
            ctx.set(dut.pop, 0)
        for i in range(PROBES):
            ctx.set(dut.offer[i], 0)
        out["counts"] = [tuple(ctx.get(getattr(dut, c)[i]) for c in ("written", "contention",
                         "overflow")) for i in range(PROBES)]  # fmt: skip
        out["samples"] = read + await _drain(ctx, dut)

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


async def _drain(ctx: Any, dut: Any) -> list[tuple[int, int, int]]:
    got = []
    if isinstance(dut, CentralStorageCore):
        while ctx.get(dut.level):
            got.append((ctx.get(dut.head_probe), ctx.get(dut.head_ticks), ctx.get(dut.head_value)))
            ctx.set(dut.pop, 1)
            await ctx.tick()
        ctx.set(dut.pop, 0)
        return got
    for i in range(PROBES):
        while ctx.get(dut.level[i]):
            got.append((i, ctx.get(dut.head_ticks[i]), ctx.get(dut.head_value[i])))
            ctx.set(dut.pop[i], 1)
            await ctx.tick()
        ctx.set(dut.pop[i], 0)
    return got


def _reference(storage: Any, cycles: list[list[tuple[int, int]]]) -> dict[str, Any]:
    ports = [storage.port(100 + i) for i in range(PROBES)]
    for c, offers in enumerate(cycles):
        for i, value in offers:
            ports[i].offer(c, value, c)
    storage.settle()
    samples = []
    for tap in storage.taps():
        recs, _ = tap.drain()
        samples += [(int(r["probe"]) - 100, int(r["ticks"]), int(r["value"])) for r in recs]
    counts = [(p.written, p.contention, p.overflow) for p in ports]
    return {"counts": counts, "samples": samples}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cycles=_cycles,
    capacity=st.sampled_from([1, 4, 16]),
    ports=st.integers(1, 2),
    hold=st.integers(1, 2),
)
@example(cycles=SATURATED, capacity=16, ports=1, hold=1)
@example(cycles=SATURATED, capacity=4, ports=2, hold=2)
@example(cycles=[(1, 5), *SATURATED[:9]], capacity=16, ports=2, hold=1)  # a single grant first
def test_central_storage_core_arbitrates_and_drops_as_the_python_storage(
    cycles: list[tuple[int, int]], capacity: int, ports: int, hold: int
) -> None:
    assume(ports <= capacity)  # each write port has a memory of its own
    offers = _offers(cycles)
    dut = CentralStorageCore(PROBES, 8, 16, capacity, ports, hold, 16)
    ref = CentralStorage(
        Kind.SAMPLE, capacity=capacity, ports=ports, hold=hold, recorder=Recorder()
    )
    # Idle cycles after the offers let the arbiter empty the hold registers (Python: settle).
    assert _run(dut, offers, PROBES * hold + 1) == _reference(ref, offers)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cycles=_cycles, ports=st.integers(1, 2), hold=st.integers(1, 2))
@example(cycles=[(1, 5), (0, 0), (1, 6), (2, 7), (3, 8)], ports=1, hold=1)
@example(cycles=[(3, 0)] * 70, ports=2, hold=1)  # 140 samples: past 64 places, never full
def test_a_host_reading_while_the_design_writes_gets_every_sample_in_order(
    cycles: list[tuple[int, int]], ports: int, hold: int
) -> None:
    """The host pops the head whenever there is one, as samples are written: a sample written
    into an empty buffer is the head in the next cycle (the memory reads it as it is written).

    Neither buffer fills: the core's level grows by one a cycle at most while the host pops
    (two writes, one pop), so 128 places outlast the longest stream; the Python storage is
    drained only at the end, so its ring holds every offer (the test of overflow is above)."""
    assert len(cycles) + PROBES * hold + 1 < 128
    offers = _offers(cycles)
    dut = CentralStorageCore(PROBES, 8, 16, 128, ports, hold, 16)
    ref = CentralStorage(Kind.SAMPLE, capacity=256, ports=ports, hold=hold, recorder=Recorder())
    got = _run(dut, offers, PROBES * hold + 1, reading=True)
    assert got == _reference(ref, offers)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cycles=_cycles, capacity=st.sampled_from([1, 4, 16]))
@example(cycles=SATURATED, capacity=4)
def test_distributed_storage_core_writes_and_drops_as_the_python_storage(
    cycles: list[tuple[int, int]], capacity: int
) -> None:
    offers = _offers(cycles)
    dut = DistributedStorageCore(PROBES, 8, 16, capacity, 16)
    ref = DistributedStorage(Kind.SAMPLE, capacity=capacity, recorder=Recorder())
    assert _run(dut, offers, 0) == _reference(ref, offers)


def test_a_long_random_stream_through_both_schemes() -> None:
    """5,000 cycles of probes offering in bursts (a seeded random stream), read after the run:
    the hold registers contend and the buffers fill; every sample and every drop as the Python
    storage's."""
    import random

    rng = random.Random(31)
    cycles: list[tuple[int, int]] = []
    while len(cycles) < 5000:
        p = rng.choice((0.05, 0.3, 0.9))
        cycles += [(sum((rng.random() < p) << i for i in range(PROBES)), rng.randrange(256))
                   for _ in range(rng.randrange(1, 200))]  # fmt: skip
    offers = _offers(cycles)
    central = _run(CentralStorageCore(PROBES, 8, 16, 1024, 2, 2, 16), offers, PROBES * 2 + 1)
    ref = CentralStorage(Kind.SAMPLE, capacity=1024, ports=2, hold=2, recorder=Recorder())
    assert central == _reference(ref, offers)
    assert all(c[1] for c in central["counts"]) and all(c[2] for c in central["counts"])
    distributed = _run(DistributedStorageCore(PROBES, 8, 16, 512, 16), offers, 0)
    ref_d = DistributedStorage(Kind.SAMPLE, capacity=512, recorder=Recorder())
    assert distributed == _reference(ref_d, offers)
    assert all(c[2] for c in distributed["counts"])
