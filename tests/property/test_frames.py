"""Frame arithmetic: splitting intervals at frame boundaries never loses or double-counts time."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate import frame_bounds, frame_index, split_at_frames

frame_ns_st = st.integers(1, 1000)
intervals_st = st.lists(
    st.tuples(st.integers(-100_000, 100_000), st.integers(0, 5000)), min_size=0, max_size=25
)


@settings(max_examples=200, deadline=None)
@given(intervals=intervals_st, frame_ns=frame_ns_st)
def test_split_keeps_all_time_in_consecutive_frames(
    intervals: list[tuple[int, int]], frame_ns: int
) -> None:
    start = np.array([s for s, _ in intervals], dtype=np.int64)
    end = np.array([s + n for s, n in intervals], dtype=np.int64)
    seg, frame, dur = split_at_frames(start, end, frame_ns)
    assert seg.dtype == frame.dtype == dur.dtype == np.int64
    assert seg.shape == frame.shape == dur.shape
    assert np.all(dur > 0)
    assert np.all(np.diff(seg) >= 0)

    for i, (s, n) in enumerate(intervals):
        mine = seg == i
        fr, d = frame[mine].tolist(), dur[mine].tolist()
        assert sum(d) == n
        if n == 0:
            assert fr == []
            continue
        assert fr == list(range(s // frame_ns, (s + n - 1) // frame_ns + 1))
        # rebuild each piece from the durations alone and check it sits inside its frame
        lo = s
        for f, length in zip(fr, d, strict=True):
            f_lo, f_hi = frame_bounds(f, frame_ns)
            assert f_lo <= lo
            assert lo + length <= f_hi
            lo += length
        assert lo == s + n


@settings(max_examples=200, deadline=None)
@given(t=st.lists(st.integers(-(2**40), 2**40), max_size=50), frame_ns=st.integers(1, 10**9))
def test_frame_index_is_floor_division(t: list[int], frame_ns: int) -> None:
    got = frame_index(np.array(t, dtype=np.int64), frame_ns)
    assert got.dtype == np.int64
    assert got.tolist() == [x // frame_ns for x in t]
    for x, f in zip(t, got.tolist(), strict=True):
        lo, hi = frame_bounds(f, frame_ns)
        assert lo <= x < hi


def test_split_small_example() -> None:
    seg, frame, dur = split_at_frames(np.array([-5, 0, 3, 10]), np.array([7, 0, 4, 31]), frame_ns=5)
    assert seg.tolist() == [0, 0, 0, 2, 3, 3, 3, 3, 3]
    assert frame.tolist() == [-1, 0, 1, 0, 2, 3, 4, 5, 6]
    assert dur.tolist() == [5, 5, 2, 1, 5, 5, 5, 5, 1]


def test_bad_input_is_rejected() -> None:
    with pytest.raises(ValueError, match="start_ns <= end_ns"):
        split_at_frames(np.array([5]), np.array([4]), 10)
    with pytest.raises(ValueError, match="frame_ns"):
        frame_index(np.array([1]), 0)
    with pytest.raises(TypeError, match="integer"):
        split_at_frames(np.array([0.5]), np.array([1.0]), 10)
