"""The register map and bus: a core configured and read through its bank behaves as the Python
probe; the bank's magic word, unmapped and read-only addresses, and multi-word reads."""

from __future__ import annotations

from typing import Any

import pytest
from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.hw.link import MAGIC
from streamscope.hw.regmap import MAGIC_ADDR, RegisterBank
from streamscope.hw.sim import SimBus
from streamscope.hw.trigger import OPS, TriggerProbe
from streamscope.probes.hardware import Condition, CountAction, Counter, Trigger

EVENTS = frozenset({"strobe", "value", "snap"})


def _simulate(bank: RegisterBank, bench: Any) -> None:
    sim = Simulator(bank)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    levels=st.lists(
        st.tuples(st.sampled_from(sorted(OPS)), st.integers(0, 15), st.integers(0, 15)),
        min_size=1,
        max_size=3,
    ),
    events=st.lists(st.tuples(st.booleans(), st.integers(0, 15), st.booleans()), max_size=120),
)
def test_a_core_configured_and_read_over_the_bus_is_the_python_probe(
    levels: list[tuple[str, int, int]], events: list[tuple[bool, int, bool]]
) -> None:
    """The host writes the trigger's levels over the bus, the design presents events, the host
    reads count (40 bits: two words), level and held at random moments (``read`` drawn): each
    read is what the Python probe says after the same events."""
    bank = RegisterBank(TriggerProbe(4, 3, 40, 8), EVENTS)
    counter = Counter(40)
    trig = Trigger([Condition(op, match, mask) for op, match, mask in levels],
                   [CountAction(counter)])  # fmt: skip
    got: list[tuple[int, int, int]] = []
    want: list[tuple[int, int, int]] = []

    async def bench(ctx: Any) -> None:
        bus = SimBus(ctx, bank)
        for i, (op, match, mask) in enumerate(levels):
            await bus.set(f"op[{i}]", OPS[op])
            await bus.set(f"match[{i}]", match)
            await bus.set(f"mask[{i}]", mask)
        await bus.set("depth", len(levels))
        held = 0
        for strobe, value, read in events:
            ctx.set(bank.strobe, int(strobe))
            ctx.set(bank.value, value)
            await ctx.tick()
            ctx.set(bank.strobe, 0)
            if strobe and trig.observe(0, value):
                held = value
            if read:  # the design idles while the host reads
                got.append((await bus.get("count"), await bus.get("level"), await bus.get("held")))
                want.append((counter.total, trig.level, held))

    _simulate(bank, bench)
    assert got == want


def test_the_bank_answers_its_magic_and_nothing_outside_its_map() -> None:
    bank = RegisterBank(TriggerProbe(8, 2, 40, 8), EVENTS)
    last = bank.registers[-1]
    seen: dict[str, int] = {}

    async def bench(ctx: Any) -> None:
        bus = SimBus(ctx, bank)
        seen["magic"] = await bus.read(MAGIC_ADDR)
        seen["outside"] = await bus.read(last.addr + last.words)
        await bus.write(bus.register("level").addr, 3)  # read-only: ignored
        seen["level"] = await bus.get("level")
        await bus.set("match[1]", 0x1AB)  # 8 bits kept
        seen["match"] = await bus.get("match[1]")
        # A 40-bit count (two words) read low word first.
        await bus.set("mask[0]", 0)
        await bus.set("depth", 1)
        for _ in range(3):
            ctx.set(bank.strobe, 1)
            await ctx.tick()
        ctx.set(bank.strobe, 0)
        seen["count"] = await bus.get("count")

    _simulate(bank, bench)
    assert seen == {"magic": MAGIC, "outside": 0, "level": 0, "match": 0xAB, "count": 3}
    with pytest.raises(KeyError, match="no register 'nope'"):
        SimBus(None, bank).register("nope")


def test_a_host_takes_a_storage_s_samples_over_the_bus_one_write_each() -> None:
    """Central storage behind its bank: the design offers samples from two probes; the host
    reads the oldest and writes ``pop`` (a pulse: one sample a write), until ``level`` is 0."""
    from streamscope.hw.storage import CentralStorageCore

    core = CentralStorageCore(2, 8, 16, 8, 1, 1, 16)
    bank = RegisterBank(core, core.EVENTS)
    got: list[tuple[int, int, int]] = []

    async def bench(ctx: Any) -> None:
        bus = SimBus(ctx, bank)
        for c in range(3):  # both probes offer for three cycles: one grant a cycle
            for i in range(2):
                ctx.set(bank.offer[i], 1)
                ctx.set(bank.value[i], 10 * i + c)
            await ctx.tick()
        for i in range(2):
            ctx.set(bank.offer[i], 0)
        for _ in range(4):
            await ctx.tick()  # the arbiter empties the hold registers
        while await bus.get("level"):
            got.append((await bus.get("head_probe"), await bus.get("head_ticks"),
                        await bus.get("head_value")))  # fmt: skip
            await bus.set("pop", 1)
        got.append((await bus.get("contention[0]"), await bus.get("contention[1]"), -1))

    _simulate(bank, bench)
    # Cycle 0: both held. 1: probe 0's granted, its new one held, probe 1's refused (its
    # hold register still full). 2: probe 1's granted, its new one held, probe 0's refused.
    # 3 and 4: the two held ones.
    assert got[:-1] == [(0, 0, 0), (1, 0, 10), (0, 1, 1), (1, 2, 12)]
    assert got[-1] == (1, 1, -1)
