"""The trigger probe core (``hw.trigger``) against the Python probes it implements
(``probes.hardware``): random configurations and random event streams, cycle by cycle in
Amaranth's simulator."""

from __future__ import annotations

from typing import Any

from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.hw.trigger import OPS, TriggerProbe
from streamscope.probes.hardware import Condition, CountAction, Counter, Trigger

WIDTH, MAX_DEPTH, COUNT_WIDTH, WRAP_WIDTH = 4, 3, 3, 8

_levels = st.lists(
    st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 15), st.integers(0, 15)),
    min_size=1,
    max_size=MAX_DEPTH,
)
_cycles = st.lists(
    st.tuples(st.booleans(), st.integers(0, 15), st.integers(0, 9)), min_size=1, max_size=300
)


def _reference(
    levels: list[tuple[str, int, int]], rom: bool, cycles: list[tuple[bool, int, int]]
) -> list[tuple[int, ...]]:
    """What the Python probes say after each cycle: fired, level, count (wrapped), wraps,
    held, and the counter's snapshot (taken before the cycle's event)."""
    counter = Counter(COUNT_WIDTH)
    trig = Trigger([Condition(op, match, mask) for op, match, mask in levels],
                   [CountAction(counter)], reset_on_mismatch=rom)  # fmt: skip
    held = snap = 0
    out = []
    for strobe, value, snap_draw in cycles:
        if snap_draw == 0:
            snap = counter.total % (1 << (COUNT_WIDTH + WRAP_WIDTH))  # its registers' bits
        fired = strobe and trig.observe(0, value)
        if fired:
            held = value
        out.append((int(fired), trig.level, counter.value, counter.wraps % (1 << WRAP_WIDTH),
                    held, snap))  # fmt: skip
    return out


def _core(
    levels: list[tuple[str, int, int]], rom: bool, cycles: list[tuple[bool, int, int]]
) -> list[tuple[int, ...]]:
    dut = TriggerProbe(WIDTH, MAX_DEPTH, COUNT_WIDTH, WRAP_WIDTH)
    out: list[tuple[int, ...]] = []

    async def bench(ctx: Any) -> None:
        for i, (op, match, mask) in enumerate(levels):
            ctx.set(dut.op[i], OPS[op])
            ctx.set(dut.match[i], match)
            ctx.set(dut.mask[i], mask)
        ctx.set(dut.depth, len(levels))
        ctx.set(dut.reset_on_mismatch, int(rom))
        for strobe, value, snap_draw in cycles:
            ctx.set(dut.strobe, int(strobe))
            ctx.set(dut.value, value)
            ctx.set(dut.snap, int(snap_draw == 0))
            await ctx.tick()
            snap = ctx.get(dut.snap_count) + (ctx.get(dut.snap_wraps) << COUNT_WIDTH)
            out.append((ctx.get(dut.fired), ctx.get(dut.level), ctx.get(dut.count),
                        ctx.get(dut.wraps), ctx.get(dut.held), snap))  # fmt: skip

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(levels=_levels, rom=st.booleans(), cycles=_cycles)
def test_the_trigger_core_counts_fires_and_holds_as_the_python_probe(
    levels: list[tuple[str, int, int]], rom: bool, cycles: list[tuple[bool, int, int]]
) -> None:
    assert _core(levels, rom, cycles) == _reference(levels, rom, cycles)


def test_a_counter_that_wraps_keeps_its_total_exact() -> None:
    """Every strobe fires (one level, value & 0 == 0): 3-bit count, wraps counted."""
    cycles = [(True, 5, 1)] * 20 + [(False, 0, 0)]
    got = _core([("==", 0, 0)], False, cycles)
    assert got[-1][2] + (got[-1][3] << COUNT_WIDTH) == 20 == got[-1][5]
    assert got == _reference([("==", 0, 0)], False, cycles)


def test_a_long_random_stream_of_each_trigger_shape() -> None:
    """Thousands of cycles in one stream (a seeded random one): deep sequences that break and
    start again, a counter that wraps many times (and its 8-bit count of wraps too), snapshots
    taken throughout; cycle for cycle the Python probe's."""
    import random

    rng = random.Random(17)
    shapes = [
        ([("==", 0, 0)], False),  # every strobe fires: the count wraps every 8
        ([("<=", 9, 15), (">=", 3, 15), ("!=", 5, 7)], True),
        ([("<", 8, 12), (">", 2, 3), ("==", 1, 1)], False),
    ]
    for levels, rom in shapes:
        cycles = [(rng.random() < 0.6, rng.randrange(16), rng.randrange(10)) for _ in range(6000)]
        got = _core(levels, rom, cycles)
        assert got == _reference(levels, rom, cycles)
        assert sum(c[0] for c in got) > 100  # it fired, again and again
