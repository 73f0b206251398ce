"""An idle channel's frames cost a look-up, and are the very frames the full reduction gives.

A channel nothing happened in since its last advance holds its level: ``ChannelStream.reduce``
feeds that level to its occupancy reducers directly (``TargetReducer.add_level``) and a frame
that held one level, or nothing, takes its points from those of an equal frame. The oracle is
the full path (every advance through ``advance`` and the accumulators), on the same records.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.specs import (
    Count,
    First,
    Histogram,
    Last,
    Max,
    Mean,
    Min,
    Quantiles,
    Sum,
)
from streamscope.core.topology import ProbeInfo
from streamscope.reduction.channelstream import ChannelEnd, ChannelStream
from streamscope.reduction.reducers import ReducerIndex, TargetReducer
from streamscope.reduction.routing import Routes

FRAME = 1_000
SPECS = {
    "occupancy": (
        Mean(),
        Max(),
        Min(),
        Count(),
        First(),
        Last(),
        Histogram.levels(0, 4),
        Quantiles((0.5, 0.99)),
    ),
    "throughput": (Mean(), Max()),
    "latency": (Mean(), Quantiles((0.5, 0.99))),
}


def _index(crossing: bool) -> ReducerIndex:
    return ReducerIndex(
        TargetReducer(i, metric, "a -> b", specs, FRAME, crossing)
        for i, (metric, specs) in enumerate(SPECS.items())
    )


def _run(bursts: list[tuple[int, int]], marks: list[int], full: bool, crossing: bool) -> list:
    """Insert-then-remove bursts (start time, items), reduced at the watermarks ``marks``."""
    ch = ChannelStream("a -> b")
    if full:
        ch._quiet = lambda: False  # type: ignore[method-assign]
    tail, head = ChannelEnd(ch, "tail"), ChannelEnd(ch, "head")
    reducers = _index(crossing)
    seq = held = 0
    out = []
    pending = sorted(bursts)
    for until in marks:
        while pending and pending[0][0] < until - 50:
            t0, n = pending.pop(0)
            t0 = max(t0, ch.last_t)
            ins = np.arange(seq + 1, seq + n + 1, dtype=np.int64)
            tail.add(t0 + np.arange(n, dtype=np.int64), ins)
            # All but one removed (a level is held after each burst, growing by one).
            rem = ins[: max(n - 1, 0)] if held == 0 else ins[:n]
            head.add(t0 + n + np.arange(len(rem), dtype=np.int64), rem)
            seq += n
        ch.reduce(until, reducers)
        out.extend(reducers.close_until(until))
    out.extend(reducers.close_until(marks[-1], end_ns=marks[-1]))
    return out


@settings(max_examples=60, deadline=None)
@given(
    bursts=st.lists(st.tuples(st.integers(0, 20_000), st.integers(1, 5)), max_size=8),
    steps=st.lists(st.integers(1, 2_500), min_size=1, max_size=40),
    crossing=st.booleans(),
)
def test_quiet_frames_equal_the_full_reduction(
    bursts: list[tuple[int, int]], steps: list[int], crossing: bool
) -> None:
    marks = list(np.cumsum(steps).tolist())
    quick = _run(bursts, marks, full=False, crossing=crossing)
    full = _run(bursts, marks, full=True, crossing=crossing)
    assert quick == full


def test_an_idle_channel_makes_no_accumulator_per_frame() -> None:
    """A channel holding 3 items for 50 frames, reduced twice per frame: its occupancy frames
    say 3 throughout, from points made once, and no frame opened accumulators."""
    ch = ChannelStream("a -> b")
    tail = ChannelEnd(ch, "tail")
    tail.add(np.array([10, 11, 12], dtype=np.int64), np.array([1, 2, 3], dtype=np.int64))
    reducers = _index(False)
    ch.reduce(FRAME, reducers)
    frames = reducers.close_until(FRAME)
    occ = reducers("occupancy", "a -> b")[0]
    for k in range(2, 100):
        ch.reduce(k * FRAME // 2, reducers)
        assert not occ._open
        frames.extend(reducers.close_until(k * FRAME // 2))
    means = [f.points[0].value for f in frames if f.query_id == 0]
    assert len(means) == 49 and means[1:] == [3.0] * 48
    quiet = [f.points for f in frames if f.query_id == 0][2:]
    assert all(p is quiet[0] for p in quiet)  # one tuple of points, shared


def _routes_run(with_boundary: bool) -> list:
    """Forty channels, records coming to a few of them now and then, advanced every 300 ns
    over frames of 1,000: with the frame boundary (channels nothing came for wait until a
    frame closes) or every channel at every advance."""
    routes = Routes({})
    reducers = ReducerIndex()
    for k in range(40):
        name = f"a -> b #{k}"
        routes.add(ProbeInfo(2 * k, "tail", name))
        routes.add(ProbeInfo(2 * k + 1, "head", name))
        for i, (metric, specs) in enumerate(SPECS.items()):
            reducers.add(TargetReducer(i, metric, name, specs, FRAME))
    rng = np.random.default_rng(7)
    seqs = [0] * 40
    out = []
    for step in range(1, 60):
        until = step * 300
        for k in rng.choice(40, size=3, replace=False).tolist():
            # Two items in, and out again but one (the first time): a level of 1 is held.
            t = np.sort(rng.integers(until - 300, until - 2, size=2)).astype(np.int64)
            seqs[k] += 2
            routes.taps[2 * k].add(t, np.array([seqs[k] - 1, seqs[k]], dtype=np.int64))
            out_n = 1 if seqs[k] == 2 else 2
            removed = np.arange(seqs[k] - 1 - out_n, seqs[k] - 1, dtype=np.int64) + 1
            routes.taps[2 * k + 1].add(t[-out_n:] + 1, removed)
        boundary = until // FRAME * FRAME if with_boundary else None
        routes.reduce(until, reducers, boundary)
        closed = reducers.close_until(until)
        # Each frame comes out at the first advance past its end, never later.
        assert all(until - 300 < r.t_end_ns <= until for r in closed)
        out.extend(closed)
    routes.reduce(18_000, reducers)
    out.extend(reducers.close_until(18_000, end_ns=18_000))
    return sorted(out, key=lambda r: (r.frame, r.query_id, r.target))


def test_channels_nothing_came_for_wait_for_their_frame_and_give_the_same_frames() -> None:
    quick, full = _routes_run(True), _routes_run(False)
    assert len(quick) == 18 * 40 * 3
    assert quick == full


def test_records_ahead_of_an_advance_are_reduced_by_the_next_one() -> None:
    """Records that came before their time was reached (ahead of the watermark) keep their
    channel stirred: the next advance reduces them even if nothing else came meanwhile, and
    no frame closes without them (the run's last advance may cross no frame boundary)."""
    routes = Routes({})
    reducers = ReducerIndex([TargetReducer(0, "count", "a -> b", (Sum(),), FRAME)])
    routes.add(ProbeInfo(1, "tail", "a -> b"))
    routes.add(ProbeInfo(2, "head", "a -> b"))
    routes.taps[1].add(np.array([500, 1500], dtype=np.int64), np.array([1, 2], dtype=np.int64))
    routes.reduce(1000, reducers, 1000)  # a frame boundary passed: every channel to 1000
    routes.reduce(1800, reducers, 1000)  # none passed; the record at 1500 is due now
    assert routes.channels["a -> b"].last_t == 1800
    frames = reducers.close_until(1800, end_ns=1800)
    assert [f.points[0].value for f in frames] == [1.0, 1.0]
