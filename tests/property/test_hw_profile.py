"""The state profile core (``hw.profile``) against the host's reduction of the same states
(``aggregate.stateframes``): random state sequences, frame by frame in Amaranth's simulator."""

from __future__ import annotations

from typing import Any

from amaranth.sim import Simulator
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.aggregate.stateframes import StateFrames
from streamscope.hw.profile import StateProfile


def _core(states: list[int], frame: int) -> list[tuple[int, ...]]:
    """Each completed frame's counts, as a host reading ``frame_counts`` on ``done`` gets them."""
    dut = StateProfile(4, 12, 12)
    out: list[tuple[int, ...]] = []

    async def bench(ctx: Any) -> None:
        ctx.set(dut.frame_cycles, frame)
        seen = 0
        for s in states:
            ctx.set(dut.state, s)
            await ctx.tick()
            if ctx.get(dut.done):
                seen += 1
                assert ctx.get(dut.frames) == seen
                out.append(tuple(ctx.get(dut.frame_counts[i]) for i in range(4)))

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def _reference(states: list[int], frame: int) -> list[tuple[int, ...]]:
    """``StateFrames`` on a grid of ``frame`` ticks, a record at each change of state (cycle
    ``k`` is in ``states[k]``; before any record, idle)."""
    sf = StateFrames()
    sf.set_grid(0.0, float(frame))
    prev = 0
    ticks, values = [], []
    for k, s in enumerate(states):
        if s != prev:
            ticks.append(k)
            values.append(s)
            prev = s
    sf.add(ticks, values)
    return [tuple(int(t) for t in f.ticks[:4]) for f in sf.close_until(len(states))]


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    runs=st.lists(st.tuples(st.integers(0, 3), st.integers(1, 40)), min_size=1, max_size=40),
    frame=st.integers(1, 97),
)
def test_the_profile_core_counts_each_frame_as_the_host_reduction(
    runs: list[tuple[int, int]], frame: int
) -> None:
    states = [s for s, n in runs for _ in range(n)]
    got = _core(states, frame)
    want = _reference(states, frame)
    assert len(got) == len(states) // frame == len(want)
    assert got == want


def test_a_long_random_stream_of_states() -> None:
    """20,000 cycles of states held for random stretches (one cycle to a hundred), frames of
    997 cycles: every frame the host's."""
    import random

    rng = random.Random(23)
    states: list[int] = []
    while len(states) < 20_000:
        states += [rng.randrange(4)] * rng.choice((1, 2, rng.randrange(1, 101)))
    got = _core(states, 997)
    assert len(got) == len(states) // 997 and got == _reference(states, 997)
