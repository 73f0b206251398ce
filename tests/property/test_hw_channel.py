"""The channel monitor core (``hw.channel``) against the host's sub-queue reducer
(``aggregate.subqueue``) on the same channel: random insertions and removals, cycle by cycle in
Amaranth's simulator, every frame's counts, level at its start, occupancy and gap histograms
(frames of a fixed number of cycles; ``test_hw_subqueue`` plays records at their ticks with the
run's grid, production gaps and profiles)."""

from __future__ import annotations

from typing import Any

import numpy as np
from amaranth.sim import Simulator
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamscope.aggregate.subqueue.fold import Carry, Records, fold
from streamscope.aggregate.subqueue.gaps import MANTISSA_BITS
from streamscope.hw.channel import ChannelMonitor

LEVELS = 6
CAPACITY = 8  # the channel's own bound: levels above LEVELS - 1 share the core's last bin
#: A cycle of 7.5 ns (the emulated device's tick): 1920/256.
TICK_Q8 = 1920
FIRST, OCTAVES = 2, 6


def _events(steps: list[tuple[int, int]]) -> list[tuple[bool, bool]]:
    """Per cycle (put, get) of a bounded FIFO channel: a put only with room, a get only with an
    item (a put and a get in one cycle: the insertion first)."""
    out, level = [], 0
    for want_put, want_get in steps:
        put = bool(want_put) and level < CAPACITY
        get = bool(want_get) and level + put > 0
        level += put - get
        out.append((put, get))
    return out


def _array(ctx: Any, dut: ChannelMonitor, name: str) -> list[int]:
    """An array of the last frame, entry by entry through ``read_at`` and ``read_data`` (the
    RAM's read is combinational); its ``nonzero`` bitmap says the same."""
    out = []
    for j in range(dut.arrays[name]):
        ctx.set(dut.read_at, dut.address(name, j))
        out.append(ctx.get(dut.read_data))
    bits = ctx.get(getattr(dut, f"nonzero_{name}"))
    assert [bool(bits >> j & 1) for j in range(len(out))] == [v != 0 for v in out]
    return out


def _core(events: list[tuple[bool, bool]], frame: int) -> list[dict[str, Any]]:
    dut = ChannelMonitor(levels=LEVELS, count_width=12, frame_width=12, gap_width=10,
                         tick_ns_q8=TICK_Q8, first_octave=FIRST, octaves=OCTAVES)  # fmt: skip
    out: list[dict[str, Any]] = []

    async def bench(ctx: Any) -> None:
        for c, (put, get) in enumerate(events):
            ctx.set(dut.put, put)
            ctx.set(dut.get, get)
            ctx.set(dut.frame_end, (c + 1) % frame == 0)  # the design's frame clock
            await ctx.tick()
            if ctx.get(dut.done):
                assert ctx.get(dut.frames) == len(out) + 1
                out.append({
                    "n": (ctx.get(dut.n_in), ctx.get(dut.n_out)),
                    "level_start": ctx.get(dut.level_start),
                    "occupancy": [ctx.get(dut.occupancy[k]) for k in range(LEVELS)],
                    "gap_in": _array(ctx, dut, "gap_in"),
                    "gap_out": _array(ctx, dut, "gap_out"),
                })  # fmt: skip

    sim = Simulator(dut)
    sim.add_clock(1e-6)
    sim.add_testbench(bench)
    sim.run()
    return out


def _lump(h: np.ndarray, lo: int, bins: int) -> list[int]:
    """The host's histogram seen through the core's ``bins`` bins starting at host bin ``lo``:
    everything below in the first, everything above in the last."""
    out = [int(h[: lo + 1].sum())]
    out += [int(x) for x in h[lo + 1 : lo + bins - 1]]
    out.append(int(h[lo + bins - 1 :].sum()))
    return out


def _reference(events: list[tuple[bool, bool]], frame: int) -> list[dict[str, Any]]:
    """The host reducer fed the channel's records: (cycle, item number) of each end."""
    ins_t = np.array([c for c, (p, _) in enumerate(events) if p], np.int64)
    rem_t = np.array([c for c, (_, g) in enumerate(events) if g], np.int64)
    none = np.zeros(0, np.int64)
    recs = Records(ins_t, np.arange(1, ins_t.size + 1), rem_t, np.arange(1, rem_t.size + 1),
                   none, none)  # fmt: skip
    nf = len(events) // frame
    grid = np.arange(nf + 1, dtype=np.int64) * frame
    keep_i, keep_r = ins_t < grid[-1], rem_t < grid[-1]
    recs = recs._replace(ins_t=ins_t[keep_i], ins_s=recs.ins_s[keep_i],
                         rem_t=rem_t[keep_r], rem_s=recs.rem_s[keep_r])  # fmt: skip
    summaries, _ = fold(recs, Carry(), grid, grid, 0, tick_ns=TICK_Q8 / 256, profile=0,
                        states=False)  # fmt: skip
    bins = 1 + (OCTAVES << MANTISSA_BITS)
    lo = FIRST << MANTISSA_BITS
    out = []
    for s in summaries:
        assert not s.lossy
        occ = np.zeros(CAPACITY + 2, np.int64)
        occ[: s.level_ticks.size] = s.level_ticks
        out.append({
            "n": (s.n_in, s.n_out),
            "level_start": s.level_start,
            "occupancy": [*map(int, occ[: LEVELS - 1]), int(occ[LEVELS - 1 :].sum())],
            "gap_in": _lump(s.gap_in, lo, bins),
            "gap_out": _lump(s.gap_out, lo, bins),
        })  # fmt: skip
    return out


#: Bursts of insertions, then a stall, then bursts of removals: levels up to the capacity and
#: gaps from one cycle to past the core's last octave (a gap of 60 cycles is 450 ns, the core's
#: range ending at 256 ns).
BURSTS = (
    [(1, 0)] * 10
    + [(0, 0)] * 60
    + [(0, 1)] * 3
    + [(1, 1)] * 20
    + [(0, 1)] * 12
    + [(1, 0)] * 2
    + [(0, 0)] * 3
    + [(0, 1)] * 2
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(st.tuples(st.integers(0, 1), st.integers(0, 1)), min_size=1, max_size=300),
    frame=st.integers(1, 64),
)
@example(steps=BURSTS, frame=14)
@example(steps=BURSTS, frame=1)
def test_the_channel_core_reduces_each_frame_as_the_host_reducer(
    steps: list[tuple[int, int]], frame: int
) -> None:
    events = _events(steps)
    got = _core(events, frame)
    want = _reference(events, frame)
    assert len(got) == len(events) // frame == len(want)
    assert got == want


def test_gap_bins_cover_the_host_scale() -> None:
    """The core's bins are the host's, shifted by its first octave: a gap of one 7.5 ns cycle
    falls in the host's bin of 7.5 ns."""
    from streamscope.aggregate.subqueue.gaps import gap_bins

    events = [(True, False), (True, False)] * 2 + [(False, False)] * 4
    got = _core(events, len(events))
    assert got[0]["gap_in"][int(gap_bins([7.5])[0]) - (FIRST << MANTISSA_BITS)] == 3


def test_a_long_random_stream_with_bursts() -> None:
    """20,000 cycles of a channel whose producer and consumer switch between fast, slow and
    stopped (a seeded random stream), frames of 1,000 cycles: every frame the host reducer's."""
    import random

    rng = random.Random(29)
    steps: list[tuple[int, int]] = []
    while len(steps) < 20_000:
        p_put, p_get = rng.choice((0.0, 0.05, 0.5, 0.95)), rng.choice((0.0, 0.05, 0.5, 0.95))
        steps += [(int(rng.random() < p_put), int(rng.random() < p_get))
                  for _ in range(rng.randrange(1, 400))]  # fmt: skip
    events = _events(steps)
    got = _core(events, 1000)
    assert len(got) == len(events) // 1000 and got == _reference(events, 1000)
    assert {f["level_start"] for f in got} >= {0, CAPACITY}  # empty and full both seen
