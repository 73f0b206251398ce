"""The RTL device's sub-queue reducer (``hw.subqueue``: records played into the channel monitor
core at their ticks, frames read over the register link) against the host's
(``aggregate.subqueue.SubQueueFrames``) on the same records, calls and grid: random channels
with bursts, a producer that blocks, refused records, records before the grid's origin; every
summary equal, the gap histograms as the core's bins hold them."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.aggregate.subqueue import SubQueueFrames
from streamscope.aggregate.subqueue.gaps import MANTISSA_BITS
from streamscope.core.records import State
from streamscope.hw.subqueue import CoreSubQueue

TICK_NS = 7.5
CAPACITY = 6
FIRST, OCTAVES = 3, 6
PROFILE = 4


def _core(**kw: Any) -> CoreSubQueue:
    return CoreSubQueue(TICK_NS, states=True, profile=PROFILE, levels=CAPACITY + 2,
                        first_octave=FIRST, octaves=OCTAVES, **kw)  # fmt: skip


def _read_cycles() -> int:
    """The most cycles a frame's read-out takes: every register's words, and two for each
    entry of the core's arrays (``read_at`` written, ``read_data`` read)."""
    core = _core()
    core.close()
    words = sum(r.words for r in core.bank.registers)
    return words + 2 * sum(core.core.arrays.values()) + 4


READ = _read_cycles()


def _skip_reads(t: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Times on a line without the ticks a frame's read-out takes after each frame's end: the
    records keep their order and gaps, and none meets a cycle the bus holds."""
    compressed = edges - np.arange(edges.size) * READ
    out: np.ndarray = t + READ * np.searchsorted(compressed, t, side="right")
    return out


def _lump(h: np.ndarray) -> np.ndarray:
    """A host histogram as the core's bins hold it (everything below the first and above the
    last in them), in the host's places."""
    lo, n = FIRST << MANTISSA_BITS, 1 + (OCTAVES << MANTISSA_BITS)
    out = np.zeros_like(h)
    out[lo : lo + n] = h[lo : lo + n]
    out[lo] += h[:lo].sum()
    out[lo + n - 1] += h[lo + n :].sum()
    return out


@st.composite
def _channels(draw: Any, refusals: bool) -> dict[str, Any]:
    n = draw(st.integers(1, 60))
    bursty = draw(st.booleans())
    gaps = draw(st.lists(st.integers(1, 400), min_size=n, max_size=n))
    if bursty:
        gaps = [1 + g // 100 if i % 7 else g * 5 for i, g in enumerate(gaps)]
    service = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    t_in = np.cumsum(gaps).astype(np.int64)
    t_out = np.empty_like(t_in)
    free = 0
    for i in range(n):
        # The channel's bound: an insertion after the removal that made room for it; a
        # removal one tick after its insertion at the earliest (one a cycle per end).
        if i >= CAPACITY:
            t_in[i:] += max(0, int(t_out[i - CAPACITY]) + 1 - int(t_in[i]))
        free = max(free + 1, int(t_in[i]) + 1, free + service[i])
        t_out[i] = free
    n_st = draw(st.integers(0, 20))
    st_t = np.sort(draw(st.lists(st.integers(0, int(t_out[-1])), min_size=n_st, max_size=n_st)))
    st_v = draw(st.lists(st.sampled_from([int(State.BUSY), int(State.BLOCKED_OUT),
                                          int(State.IDLE)]), min_size=n_st, max_size=n_st))  # fmt: skip
    origin = draw(st.integers(0, 300))
    frames = draw(st.integers(1, 8))  # (each read over the link: a few hundred cycles)
    period = max(400, int(t_out[-1]) // frames)
    refused_in = draw(st.sets(st.integers(0, n - 1), max_size=3 * refusals))
    refused_out = draw(st.sets(st.integers(0, n - 1), max_size=3 * refusals))
    cuts = draw(st.lists(st.integers(0, int(t_out[-1]) + 10), max_size=4))
    return {
        "t_in": t_in, "t_out": t_out, "st_t": np.asarray(st_t, np.int64),
        "st_v": np.asarray(st_v, np.int64), "origin": origin, "period": period,
        "refused": (refused_in, refused_out), "cuts": sorted(cuts),
    }  # fmt: skip


def _drive(red: Any, case: dict[str, Any], edges: np.ndarray) -> list[Any]:
    t_in, t_out = _skip_reads(case["t_in"], edges), _skip_reads(case["t_out"], edges)
    st_t = _skip_reads(case["st_t"], edges)
    seq = np.arange(1, t_in.size + 1)
    keep_in = ~np.isin(np.arange(t_in.size), list(case["refused"][0]))
    keep_out = ~np.isin(np.arange(t_out.size), list(case["refused"][1]))
    red.set_grid(case["origin"], case["period"])
    out: list[Any] = []
    lo = -1
    end = int(_skip_reads(np.array([max(case["t_out"][-1], case["t_in"][-1]) + 2]), edges)[0])
    for wm in [*(_skip_reads(np.array(case["cuts"]), edges).tolist()), end]:
        for t, ok, add in ((t_in, keep_in, red.add_insertions),
                           (t_out, keep_out, red.add_removals)):  # fmt: skip
            sel = ok & (t > lo) & (t <= wm)
            add(t[sel], seq[sel])
        sel = (st_t > lo) & (st_t <= wm)
        red.add_states(st_t[sel], case["st_v"][sel])
        lo = wm
        out += red.close_until(wm)
    for i in case["refused"][0]:
        red.know_insertions(i + 1)
    for i in case["refused"][1]:
        red.know_removals(i + 1)
    out += red.finish(end)
    return out


def _both(case: dict[str, Any]) -> tuple[list[Any], list[Any], CoreSubQueue]:
    edges = case["origin"] + case["period"] * np.arange(1, 400, dtype=np.int64)
    core = _core()
    want = _drive(SubQueueFrames(TICK_NS, states=True, profile=PROFILE), case, edges)
    got = _drive(core, case, edges)
    assert len(got) == len(want)
    return got, want, core


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_channels(refusals=False))
def test_the_core_reduces_a_sub_queue_as_the_host_does(case: dict[str, Any]) -> None:
    got, want, core = _both(case)
    assert core.shifted == 0
    for g, w in zip(got, want, strict=True):
        for name in ("gap_in", "gap_out", "gap_prod"):
            object.__setattr__(w, name, _lump(getattr(w, name)))
        assert g == w, (g, w)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=_channels(refusals=True))
def test_items_of_refused_records_are_counted_and_their_frames_lossy(case: dict[str, Any]) -> None:
    """A record stands for the items refused before it: the host counts them at its tick, the
    core one a cycle from there (a tick or a few later: shifted, with the records that follow
    one a cycle, and the level's ticks with them); every frame's counts and ``lossy`` agree."""
    got, want, core = _both(case)
    # (a record one a cycle behind another waits a tick for each refused item before it)
    assert core.most_shifted <= len(case["refused"][0]) + len(case["refused"][1])
    assert [(g.frame, g.n_in, g.n_out) for g in got] == [(w.frame, w.n_in, w.n_out) for w in want]
    assert [g.lossy for g in got] == [w.lossy for w in want]
