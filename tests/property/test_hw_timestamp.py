"""The timestamp core (``hw.timestamp``) answering round trips over its register bus, against the
emulated device clock it stands for (one tick a cycle)."""

from __future__ import annotations

from typing import Any

import numpy as np
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.hw.regmap import RegisterBank
from streamscope.hw.sim import SimBus
from streamscope.hw.timestamp import Timestamp
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

CYCLE_NS = 20  # a 50 MHz device


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(waits=st.lists(st.integers(0, 300), min_size=1, max_size=12))
def test_each_answer_is_the_device_clock_in_the_cycle_of_the_request(waits: list[int]) -> None:
    """The host waits, requests (a bus write: the cycle it lands in is counted here), reads the
    answer and the count of answers; a 10-bit counter wraps on the way."""
    core = Timestamp(10, 8)
    bank = RegisterBank(core, core.EVENTS)
    clock = EmulatedClock(EmulatedClockSpec(tick_ns=CYCLE_NS), 0)
    got: list[tuple[int, int]] = []
    want: list[tuple[int, int]] = []

    async def bench(ctx: Any) -> None:
        bus = SimBus(ctx, bank)
        cycle = 0
        for n, wait in enumerate(waits, start=1):
            for _ in range(wait):
                await ctx.tick()
            cycle += wait
            await bus.set("req", 1)  # lands in this cycle
            true = int(clock.ticks_at(np.array([cycle * CYCLE_NS]))[0])
            want.append((true % (1 << 10), n))
            cycle += 1
            got.append((await bus.get("stamp"), await bus.get("answered")))
            cycle += 2  # two reads, a cycle each

    sim = Simulator(bank)
    sim.add_clock(CYCLE_NS * 1e-9)
    sim.add_testbench(bench)
    sim.run()
    assert got == want
