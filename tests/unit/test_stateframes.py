"""A stage's states reduced to frames where they are recorded (a host's agent), against the same
records reduced by the monitor's own stage stream."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.stateframes import (
    N_STATES,
    StateFrame,
    StateFrameError,
    StateFrames,
    decode_state_frames,
    encode_state_frames,
)
from streamscope.reduction.streams import StageStream, SummarizedStage


def test_time_in_each_state_per_frame_with_idle_before_the_first_record() -> None:
    sf = StateFrames()
    sf.set_grid(100.0, 1000.0)  # frames [100, 1100), [1100, 2100), ...
    sf.add([600, 900, 1500], [1, 2, 1])
    assert sf.close_until(1099) == []
    (f0,) = sf.close_until(1100)
    assert f0.frame == 0 and f0.covered == 1000.0 and f0.end_state == 2
    assert f0.ticks[:4] == (500.0, 300.0, 200.0, 0.0)  # idle, busy, blocked_in, blocked_out
    (f1, f2) = sf.finish(2600)
    assert f1.ticks[:3] == (0.0, 600.0, 400.0) and f1.covered == 1000.0
    assert f2.frame == 2 and f2.covered == 500.0 and f2.ticks[1] == 500.0


@settings(max_examples=60, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 400), min_size=1, max_size=60),
    states=st.lists(st.integers(0, 3), min_size=60, max_size=60),
    end=st.integers(1, 3000),
)
def test_frames_give_the_duty_the_monitor_gets_from_the_records(
    gaps: list[int], states: list[int], end: int
) -> None:
    """The same state records (ns ticks, grid at 0, frames of 500 ns): the monitor's stream
    from records and the summarised stream from frames spend the same time in each state."""
    t = np.cumsum(gaps).astype(np.int64)
    s = np.array(states[: len(t)], dtype=np.int64)
    end = int(max(end, t[-1] + 1))
    sf = StateFrames()
    sf.set_grid(0.0, 500.0)
    sf.add(t, s)
    payload = encode_state_frames(7, sf.finish(end))
    probe, frames = decode_state_frames(payload)
    assert probe == 7
    raw, summed = StageStream("x"), SummarizedStage("x", 500)
    raw.add(t, s)
    summed.add_frames(frames, int)
    for until in range(500, end + 500, 500):
        for stream in (raw, summed):
            stream.feed(stream.advance(min(until, end)), lambda m, t: (), 0, 0)
    assert summed.spent_ns[:4] == pytest.approx(raw.spent_ns[:4], abs=len(t) + 4)
    assert sum(summed.spent_ns) == end


def test_a_host_s_frames_serve_state_queries_on_any_multiple_of_their_length() -> None:
    """A stage's states reduced on frames of 500 ns (its queries' frames' greatest common
    divisor) give a query on 1500 ns frames the duty the monitor gets from the records."""
    from streamscope.aggregate.specs import Duty
    from streamscope.reduction.reducers import TargetReducer

    rng = np.random.default_rng(3)
    t = np.cumsum(rng.integers(1, 300, 80)).astype(np.int64)
    s = rng.integers(0, 4, len(t)).astype(np.int64)
    end = int(t[-1]) + 1
    sf = StateFrames()
    sf.set_grid(0.0, 500.0)
    sf.add(t, s)
    _, frames = decode_state_frames(encode_state_frames(1, sf.finish(end)))
    raw, summed = StageStream("x"), SummarizedStage("x", 500)
    raw.add(t, s)
    summed.add_frames(frames, int)
    duties = []
    for stream in (raw, summed):
        r = TargetReducer(0, "state", "x", (Duty(),), 1500)
        for until in range(500, end + 500, 500):
            stream.feed(stream.advance(min(until, end)), lambda m, n, r=r: (r,), 0, 0)
        duties.append([f.points[0].fractions for f in r.close_until(end, end)])  # type: ignore[union-attr]
    assert len(duties[0]) == len(duties[1]) >= 2
    for a, b in zip(*duties, strict=True):
        assert b == pytest.approx(a, abs=0.02)


def test_a_frame_no_summary_reached_is_unknown_not_idle() -> None:
    stream = SummarizedStage("x", 1000)
    stream.add_frames([StateFrame(1, (0.0, 1000.0, 0.0, 0.0, 0.0), 1000.0, 1)], int)
    seg = stream.advance(2000)
    assert seg.level.tolist() == [-1, 1]
    assert seg.start.tolist() == [0, 1000] and seg.end.tolist() == [1000, 2000]


def test_a_payload_that_is_not_whole_state_frames_is_refused() -> None:
    good = encode_state_frames(3, [StateFrame(0, (1.0,) * N_STATES, 5.0, 0)])
    with pytest.raises(StateFrameError, match="bytes for 1 frames"):
        decode_state_frames(good[:-1])
    with pytest.raises(StateFrameError, match="magic"):
        decode_state_frames(b"XXXX" + good[4:])


def test_a_stage_busy_since_its_last_record_is_seen_stalled_from_its_frames() -> None:
    """A stage on a host hangs busy: its records stop, its frames go on (all busy); the
    latest record's time comes with them, mapped to virtual ns, and the stall watch sees it
    as from records."""
    from streamscope.monitor.stalls import StallWatch

    sf = StateFrames()
    sf.set_grid(0.0, 100_000_000.0)  # 100 ms frames, ticks of 1 ns
    sf.add([5_000_000, 20_000_000], [1, 1])  # busy, then a heartbeat; then nothing more
    stream = SummarizedStage("hung", 100_000_000)
    watch = StallWatch(300_000_000)
    for k in range(1, 6):  # the host closes a frame every 100 ms
        _, frames = decode_state_frames(encode_state_frames(1, sf.close_until(k * 100_000_000)))
        stream.add_frames(frames, lambda t: t + 1_000)  # the host's ticks, mapped
        stream.feed(stream.advance(k * 100_000_000), lambda m, t: (), 0, 0)
        watch.watch(1, stream, k * 100_000_000)
    (stall,) = watch.current()
    assert stall.stage == "hung" and stall.start_ns == 20_001_000
    assert stream.spent_ns[1] == 500_000_000 - 5_000_000  # busy from its first record on
    assert stream.first_record_t == 0  # in its first frame (a host keeps the records)
    raw = StageStream("kept")
    raw.add(np.array([7_000, 9_000]), np.array([1, 2]))
    raw.advance(5_000)
    assert raw.first_record_t == -1  # none before 5 us
    raw.advance(20_000)
    assert raw.first_record_t == 7_000
