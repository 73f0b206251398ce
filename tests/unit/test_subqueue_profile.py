"""The sub-queue reducer's profiles (insertions and removals per equal sub-window of a frame)
and the summary's version-2 binary form that carries them."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.subqueue import (
    SubQueueFrames,
    SubQueueSummary,
    SummaryFormatError,
    decode_summaries,
    encode_summaries,
)


def arr(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def frames(
    ins: list[int], k: int, period: float = 10.0, end: int = 30, rem: tuple[int, ...] = ()
) -> list[SubQueueSummary]:
    sq = SubQueueFrames(profile=k)
    sq.set_grid(0, period)
    sq.add_insertions(arr(*ins), np.arange(1, len(ins) + 1, dtype=np.int64))
    sq.add_removals(arr(*rem), np.arange(1, len(rem) + 1, dtype=np.int64))
    return sq.finish(end)


def test_profiles_count_insertions_and_removals_per_sub_window() -> None:
    f0, f1, f2 = frames([0, 1, 5, 9, 12, 29], k=5, rem=(3, 4, 11, 11, 19))
    assert f0.profile is not None and f0.profile.tolist() == [2, 0, 1, 0, 1]
    assert f1.profile is not None and f1.profile.tolist() == [0, 1, 0, 0, 0]
    assert f2.profile is not None and f2.profile.tolist() == [0, 0, 0, 0, 1]
    assert [int(f.profile.sum()) for f in (f0, f1, f2) if f.profile is not None] == [4, 1, 1]
    assert f0.profile_out is not None and f0.profile_out.tolist() == [0, 1, 1, 0, 0]
    assert f1.profile_out is not None and f1.profile_out.tolist() == [2, 0, 0, 0, 1]
    assert f2.profile_out is not None and f2.profile_out.tolist() == [0] * 5
    assert [f.n_out for f in (f0, f1, f2)] == [2, 3, 0]


def test_sub_windows_of_a_span_the_count_does_not_divide() -> None:
    # 10 ticks in 4 sub-windows: they start at (i * 10) // 4 = 0, 2, 5, 7
    (f,) = frames([1, 2, 4, 5, 6, 7, 9], k=4, end=10)
    assert f.profile is not None and f.profile.tolist() == [1, 2, 2, 2]
    # more sub-windows than ticks: the empty ones stay empty, each tick lands in one
    (g,) = frames([0, 3, 9], k=32, end=10)
    assert g.profile is not None and g.profile.sum() == 3 and g.profile[-1] == 1


def test_profile_is_off_by_default_and_checked() -> None:
    (f,) = frames([1, 2], k=0, end=10)
    assert f.profile is None and f.profile_out is None
    for bad in (-1, 70_000, 1.5):
        with pytest.raises(ValueError, match="profile"):
            SubQueueFrames(profile=bad)  # type: ignore[arg-type]


def test_refused_items_count_where_the_next_kept_record_lies() -> None:
    sq = SubQueueFrames(profile=2)
    sq.set_grid(0, 10)
    sq.add_insertions(arr(1, 7, 13), arr(1, 4, 5))  # items 2 and 3 refused
    sq.add_removals(arr(2, 16), arr(1, 3))  # removal 2 refused
    f0, f1 = sq.finish(20)
    assert f0.lossy and f0.n_in == 4 and f0.profile is not None
    assert f0.profile.tolist() == [1, 3]
    assert f1.profile is not None and f1.profile.tolist() == [1, 0]
    assert f0.profile_out is not None and f0.profile_out.tolist() == [1, 0]
    assert f1.profile_out is not None and f1.profile_out.tolist() == [0, 2]


def test_partial_last_frame_keeps_the_grid_sub_windows() -> None:
    (f,) = frames([0, 1, 2, 3], k=4, end=5, period=8.0)
    assert f.covered_ticks == 5
    assert f.profile is not None and f.profile.tolist() == [2, 2, 0, 0]


def test_version_2_round_trip_and_version_1_unchanged() -> None:
    with_p = frames([0, 1, 5, 9, 12], k=5)
    without = frames([0, 1, 5, 9, 12], k=0)
    for a, b in zip(with_p, without, strict=True):
        assert struct.unpack_from("<H", a.to_bytes(), 4)[0] == 2
        assert struct.unpack_from("<H", b.to_bytes(), 4)[0] == 1
        assert SubQueueSummary.from_bytes(a.to_bytes()) == a
        assert SubQueueSummary.from_bytes(b.to_bytes()) == b
        assert a != b  # the profile is part of the value
    key, back = decode_summaries(encode_summaries(5, [*with_p, *without]))
    assert key == 5 and back == [*with_p, *without]


@pytest.mark.parametrize(
    ("mangle", "match"),
    [
        (lambda b: b[:4] + b"\x01\x00" + b[6:], "version 1 summary with flags"),
        (lambda b: b[:6] + bytes([b[6] & ~4]) + b[7:], "version 2 summary with flags"),
        (lambda b: b[:88] + struct.pack("<III", 0, 0, 0) + b[100:], "0 sub-windows"),
        (lambda b: b[:88] + struct.pack("<III", 3, 4, 0) + b[100:], "3 sub-windows, 4 and 0"),
        (lambda b: b[:88] + struct.pack("<III", 5, 3, 6) + b[100:], "5 sub-windows, 3 and 6"),
        (lambda b: b[:-26] + struct.pack("<H", 7) + b[-24:], "corrupt sparse"),  # bin 7 of 5
        (lambda b: b[:-8] + struct.pack("<q", 0), "corrupt sparse"),
        (lambda b: b[:92], "cut short"),
    ],
)
def test_corrupt_version_2_is_refused(mangle, match) -> None:  # type: ignore[no-untyped-def]
    (s,) = frames([0, 1, 5, 9], k=5, end=10)  # no removal: the insertions' profile is last
    with pytest.raises(SummaryFormatError, match=match):
        SubQueueSummary.from_bytes(mangle(s.to_bytes()))


def test_a_profile_that_cannot_be_stored_is_refused() -> None:
    (s,) = frames([0, 1], k=5, end=10)
    bad = SubQueueSummary(**{**{f: getattr(s, f) for f in s.__dataclass_fields__},
                             "profile": np.array([1, -1])})  # fmt: skip
    with pytest.raises(ValueError, match="profile"):
        bad.to_bytes()
    half = SubQueueSummary(**{**{f: getattr(s, f) for f in s.__dataclass_fields__},
                              "profile_out": None})  # fmt: skip
    with pytest.raises(ValueError, match="both profiles"):
        half.to_bytes()


def _reference(
    t: np.ndarray, kept: np.ndarray, f: SubQueueSummary, k: int, last: bool
) -> list[int]:
    """One end's profile of frame ``f``, tick by tick: each kept record carries the items
    refused before it; with ``last``, those refused after the last kept record count just
    before the end (in the last frame)."""
    span = f.end_ticks - f.start_ticks
    starts = [f.start_ticks + (i * span) // k for i in range(k)]
    want = [0] * k
    last_kept = 0
    for si, (ti, ki) in enumerate(zip(t.tolist(), kept.tolist(), strict=True), start=1):
        if not ki:
            continue
        if f.start_ticks <= ti < f.start_ticks + f.covered_ticks:
            want[max(j for j in range(k) if starts[j] <= ti)] += si - last_kept
        last_kept = si
    if last and t.size and not kept[-1] and f.covered_ticks:
        at = f.start_ticks + f.covered_ticks - 1
        want[max(j for j in range(k) if starts[j] <= at)] += t.size - last_kept
    return want


@settings(max_examples=150, deadline=None)
@given(
    gaps=st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9)), max_size=60),
    keep=st.lists(st.tuples(st.booleans(), st.booleans()), min_size=60, max_size=60),
    k=st.integers(1, 24),
    period=st.floats(1.0, 40.0, allow_nan=False),
    origin=st.floats(-10.0, 20.0, allow_nan=False),
    cuts=st.integers(0, 2**16),
)
def test_profiles_match_brute_force(
    gaps: list[tuple[int, int]],
    keep: list[tuple[bool, bool]],
    k: int,
    period: float,
    origin: float,
    cuts: int,
) -> None:
    """Random FIFO insertions and removals (some refused at either end) fed in random chunks
    and closed at random watermarks: each frame's profiles equal a tick-by-tick count, and sum
    to its n_in and n_out."""
    n = len(gaps)
    t_in = np.cumsum(np.array([g for g, _ in gaps], dtype=np.int64))
    t_out = np.zeros(n, np.int64)
    for i, (_, svc) in enumerate(gaps):  # test-only: a FIFO server's removals
        t_out[i] = max(int(t_in[i]), int(t_out[i - 1]) if i else 0) + svc
    seqs = np.arange(1, n + 1, dtype=np.int64)
    k_in = np.array([a for a, _ in keep[:n]], dtype=bool)
    k_out = np.array([b for _, b in keep[:n]], dtype=bool)
    end = int(t_out[-1]) + 5 if n else 10
    rng = random.Random(cuts)
    sq = SubQueueFrames(profile=k)
    sq.set_grid(origin, period)
    got: list[SubQueueSummary] = []
    ends = [
        (t_in[k_in], seqs[k_in], sq.add_insertions),
        (t_out[k_out], seqs[k_out], sq.add_removals),
    ]
    pos = [0, 0]
    for w in sorted(rng.sample(range(-5, end), 3)):  # the end closes the last
        for e, (tk, sk, add) in enumerate(ends):
            m = int(np.searchsorted(tk, w))
            add(tk[pos[e] : m], sk[pos[e] : m])
            pos[e] = max(pos[e], m)
        got += sq.close_until(w)
    for e, (tk, sk, add) in enumerate(ends):
        add(tk[pos[e] :], sk[pos[e] :])
    if n and not k_in[-1]:
        sq.know_insertions(n)
    if n and not k_out[-1]:
        sq.know_removals(n)
    got += sq.finish(end)
    for f in got:
        assert f.profile is not None and f.profile_out is not None
        assert int(f.profile.sum()) == f.n_in and int(f.profile_out.sum()) == f.n_out
        last = f is got[-1]
        assert f.profile.tolist() == _reference(t_in, k_in, f, k, last), f
        assert f.profile_out.tolist() == _reference(t_out, k_out, f, k, last), f
        assert SubQueueSummary.from_bytes(f.to_bytes()) == f
