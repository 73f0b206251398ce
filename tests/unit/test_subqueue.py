"""The per-frame sub-queue reducer: one small example per rule, and the summary's binary form."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.aggregate.subqueue import (
    GAP_EDGES_NS,
    N_GAP_BINS,
    SubQueueFrames,
    SubQueueSummary,
    SummaryFormatError,
    decode_summaries,
    encode_summaries,
    gap_bins,
    gap_edges_ns,
)
from streamscope.core.errors import StreamscopeError
from streamscope.core.records import State


def arr(*xs: int) -> np.ndarray:
    return np.array(xs, dtype=np.int64)


def seq(n: int, first: int = 1) -> np.ndarray:
    return np.arange(first, first + n, dtype=np.int64)


def reducer(
    ins: list[int],
    rem: list[int],
    period: float = 10.0,
    origin: float = 0.0,
    tick_ns: float = 1.0,
    states: bool = False,
) -> SubQueueFrames:
    sq = SubQueueFrames(tick_ns, states=states)
    sq.set_grid(origin, period)
    sq.add_insertions(arr(*ins), seq(len(ins)))
    sq.add_removals(arr(*rem), seq(len(rem)))
    return sq


def gaps(h: np.ndarray) -> dict[int, int]:
    """{bin: count} of a histogram."""
    return {int(i): int(h[i]) for i in np.flatnonzero(h)}


def test_gap_edges_and_bins() -> None:
    assert GAP_EDGES_NS.dtype == np.float64
    assert len(GAP_EDGES_NS) == 8 * 42 + 2 == N_GAP_BINS + 1
    assert GAP_EDGES_NS[0] == 0.0
    assert GAP_EDGES_NS[1] == 1.0
    assert GAP_EDGES_NS[-1] == 2.0**42
    assert gap_bins([0.0, 0.5, 1.0, 1.5, 2.0, 1e300]).tolist() == [0, 0, 1, 5, 9, N_GAP_BINS - 1]
    assert np.array_equal(gap_edges_ns(2.0), 2.0 * GAP_EDGES_NS)
    with pytest.raises(ValueError, match="scale"):
        gap_edges_ns(0.0)


def test_levels_counts_and_time_at_each_level() -> None:
    sq = reducer(ins=[0, 2], rem=[5, 6])
    (f,) = sq.finish(10)
    # level 1 over [0, 2), 2 over [2, 5), 1 over [5, 6), 0 over [6, 10)
    assert f.level_ticks.tolist() == [4, 3, 3]
    assert (f.n_in, f.n_out, f.level_start) == (2, 2, 0)
    assert (f.frame, f.start_ticks, f.end_ticks, f.covered_ticks) == (0, 0, 10, 10)
    assert not f.lossy


def test_level_is_carried_across_frames_and_empty_frames_are_emitted() -> None:
    sq = reducer(ins=[3, 4], rem=[7])
    frames = sq.close_until(40)
    assert [f.frame for f in frames] == [0, 1, 2, 3]
    assert frames[0].level_ticks.tolist() == [3, 4, 3]
    for f in frames[1:]:
        assert f.level_start == 1
        assert f.level_ticks.tolist() == [0, 10]
        assert (f.n_in, f.n_out) == (0, 0)
        assert not f.gap_in.any()
    assert sq.in_queue == 1  # only the item still inside is kept
    assert sq.pending == 0


def test_back_to_back_departures_only() -> None:
    # item 2 is inserted (1) before item 1 leaves (5): 5 -> 8 is a service gap
    (f,) = reducer(ins=[0, 1], rem=[5, 8]).finish(10)
    assert gaps(f.gap_out) == {int(gap_bins([3.0])[0]): 1}
    # item 2 arrives (6) after item 1 left (5): the server idled, no departure gap
    (f,) = reducer(ins=[0, 6], rem=[5, 8]).finish(10)
    assert not f.gap_out.any()
    # arriving at the very tick the previous item leaves still counts as back to back
    (f,) = reducer(ins=[0, 5], rem=[5, 8]).finish(10)
    assert gaps(f.gap_out) == {int(gap_bins([3.0])[0]): 1}
    # the inter-insertion gaps are all counted
    assert gaps(f.gap_in) == {int(gap_bins([5.0])[0]): 1}


def test_gap_belongs_to_the_frame_of_its_later_record() -> None:
    frames = reducer(ins=[8, 12], rem=[9, 13]).finish(20)
    assert not frames[0].gap_in.any()
    assert gaps(frames[1].gap_in) == {int(gap_bins([4.0])[0]): 1}
    assert frames[0].n_in == frames[1].n_in == 1


def test_gaps_are_binned_in_nominal_ns() -> None:
    (f,) = reducer(ins=[0, 4], rem=[], tick_ns=2.5).finish(10)
    assert gaps(f.gap_in) == {int(gap_bins([10.0])[0]): 1}
    h = f.histogram("gap_in")
    assert h is not None
    edges, w = h
    assert w.tolist() == [1.0]
    assert edges[0] <= 10.0 < edges[1]
    h2 = f.histogram("gap_in", scale=1.5)
    assert h2 is not None
    assert np.allclose(h2[0], 1.5 * edges)


def test_production_gaps_leave_out_blocked_out_time() -> None:
    sq = reducer(ins=[0, 10], rem=[], period=20.0)
    sq.add_states(arr(1, 3, 7), arr(State.BUSY, State.BLOCKED_OUT, State.BUSY))
    (f,) = sq.finish(20)
    assert gaps(f.gap_in) == {int(gap_bins([10.0])[0]): 1}
    assert f.gap_prod is not None
    assert gaps(f.gap_prod) == {int(gap_bins([6.0])[0]): 1}
    # without states the summary has no production gaps
    (g,) = reducer(ins=[0, 10], rem=[], period=20.0).finish(20)
    assert g.gap_prod is None
    assert g.histogram("gap_prod") is None
    # asking for them up front gives them even when the producer never blocked
    (h,) = reducer(ins=[0, 10], rem=[], period=20.0, states=True).finish(20)
    assert h.gap_prod is not None
    assert np.array_equal(h.gap_prod, h.gap_in)


def test_blocked_time_spanning_watermarks_is_kept() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0, 10)
    sq.add_insertions(arr(2), seq(1))
    sq.add_states(arr(4), arr(State.BLOCKED_OUT))
    assert len(sq.close_until(10)) == 1
    sq.add_states(arr(15), arr(State.BUSY))
    sq.add_insertions(arr(22), seq(1, first=2))
    frames = sq.close_until(30)
    assert frames[-1].gap_prod is not None
    assert gaps(frames[-1].gap_prod) == {int(gap_bins([20.0 - 11.0])[0]): 1}


def test_partial_last_frame() -> None:
    frames = reducer(ins=[1, 21, 26], rem=[2, 22, 29]).finish(25)
    assert [(f.start_ticks, f.end_ticks, f.covered_ticks) for f in frames] == [
        (0, 10, 10),
        (10, 20, 10),
        (20, 30, 5),
    ]
    last = frames[-1]
    assert last.level_ticks.tolist() == [4, 1]
    assert (last.n_in, last.n_out) == (1, 1)  # records at or after the end are dropped
    assert reducer(ins=[1], rem=[]).finish(20)[-1].covered_ticks == 10  # on a boundary: whole
    assert reducer(ins=[1], rem=[], origin=50.0).finish(20) == []  # ends before the grid


def test_watermark_closes_only_frames_that_end_by_it() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0.4, 10.0)  # boundaries 0, 10, 20, ...
    sq.add_insertions(arr(5, 10), seq(2))
    assert sq.close_until(9) == []
    (f,) = sq.close_until(10)
    assert (f.start_ticks, f.end_ticks, f.n_in) == (0, 10, 1)
    assert sq.close_until(19) == []
    # a record at the watermark may still come
    sq.add_insertions(arr(19), seq(1, first=3))
    (g,) = sq.close_until(25)
    assert g.n_in == 2
    assert g.level_ticks.tolist() == [0, 0, 9, 1]


def test_rounded_grid_boundaries() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0.0, 2.5)
    frames = sq.close_until(10)
    assert [(f.start_ticks, f.end_ticks) for f in frames] == [(0, 3), (3, 5), (5, 8), (8, 10)]
    assert [f.covered_ticks for f in frames] == [3, 2, 3, 2]  # half-way rounds up


def test_grid_set_late_and_records_before_origin() -> None:
    sq = SubQueueFrames()
    sq.add_insertions(arr(-5, -3, 2), seq(3))
    sq.add_removals(arr(-4), seq(1))
    assert sq.close_until(100) == []  # no grid yet: everything waits
    assert sq.pending == 4
    sq.set_grid(0, 10)
    sq.add_removals(arr(12), seq(1, first=2))
    frames = sq.close_until(20)
    assert [f.frame for f in frames] == [0, 1]
    f0, f1 = frames
    assert f0.level_start == 1  # two in, one out before the origin
    assert f0.level_ticks.tolist() == [0, 2, 8]
    assert (f0.n_in, f0.n_out) == (1, 0)
    assert gaps(f0.gap_in) == {int(gap_bins([5.0])[0]): 1}  # -3 -> 2, counted in frame 0
    assert f1.level_ticks.tolist() == [0, 8, 2]
    assert sq.in_queue == 1


def test_refused_records_flag_the_frame_and_keep_levels_exact() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0, 10)
    sq.add_insertions(arr(1, 2, 15), arr(1, 2, 5))  # items 3 and 4 were refused
    sq.add_removals(arr(3, 16), arr(1, 4))  # removals 2 and 3 were refused
    f0, f1 = sq.close_until(20)
    assert not f0.lossy
    assert f1.lossy
    assert (f1.n_in, f1.n_out) == (3, 3)
    assert f1.level_start == 1
    # level 1 until 15, then 5 - 1 = 4 until the removal seq 4 at 16 brings it back to 1
    assert f1.level_ticks.tolist() == [0, 9, 0, 0, 1]
    assert not f1.gap_in.any()  # 2 -> 5 spans refused insertions: no gap
    assert not f1.gap_out.any()
    assert sq.in_queue == 1  # item 5


def test_first_record_refused_is_lossy() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0, 10)
    sq.add_insertions(arr(4, 5), arr(2, 3))
    (f,) = sq.close_until(10)
    assert f.lossy
    assert f.n_in == 3


def test_input_is_checked() -> None:
    sq = SubQueueFrames()
    sq.add_insertions(arr(1, 5), seq(2))
    with pytest.raises(TypeError, match="integer"):
        sq.add_removals(np.array([1.5]), seq(1))
    with pytest.raises(ValueError, match="1 tick"):
        sq.set_grid(0, 0.5)
    sq.set_grid(0, 10)
    with pytest.raises(ValueError, match="before it starts"):
        sq.set_grid(-100, 10)
    with pytest.raises(ValueError, match="finish"):
        sq.close_until(2**62)
    sq.finish(30)
    with pytest.raises(RuntimeError, match="finished"):
        sq.add_insertions(arr(40), seq(1, first=3))
    with pytest.raises(ValueError, match="tick_ns"):
        SubQueueFrames(tick_ns=0.0)


def test_misordered_chunks_are_sorted_not_refused() -> None:
    def frames(chunks: list[tuple[list[int], list[int]]]) -> list[SubQueueSummary]:
        sq = SubQueueFrames()
        sq.set_grid(0, 10)
        for t, s in chunks:
            sq.add_insertions(arr(*t), arr(*s))
        sq.add_removals(arr(6, 7, 12), seq(3))
        return sq.finish(20)

    ordered = frames([([1, 2], [1, 2]), ([3], [3])])
    assert frames([([3], [3]), ([1, 2], [1, 2])]) == ordered
    assert frames([([2, 1], [2, 1]), ([3], [3])]) == ordered


def test_records_late_for_a_closed_frame_count_in_the_next() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0, 10)
    assert len(sq.close_until(10)) == 1
    sq.add_insertions(arr(4), seq(1))  # broke the watermark contract
    (f,) = sq.close_until(20)
    assert (f.n_in, f.level_start, f.level_ticks.tolist()) == (1, 0, [0, 10])


def test_histogram_gives_the_non_empty_range() -> None:
    (f,) = reducer(ins=[0, 1, 5, 105], rem=[], period=200.0).finish(200)
    h = f.histogram("gap_in")
    assert h is not None
    edges, w = h
    b1, b4, b100 = gap_bins([1.0, 4.0, 100.0]).tolist()
    assert np.array_equal(edges, GAP_EDGES_NS[b1 : b100 + 2])
    assert w.size == b100 - b1 + 1
    assert (w[0], w[b4 - b1], w[-1], w.sum()) == (1.0, 1.0, 1.0, 3.0)
    assert f.histogram("gap_out") is None  # empty: nothing to sample
    with pytest.raises(ValueError, match="which"):
        f.histogram("up")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scale"):
        f.histogram("gap_in", scale=-1.0)


def _sample() -> SubQueueSummary:
    sq = reducer(ins=[0, 1, 5, 14], rem=[6, 7, 15], states=True)
    sq.add_states(arr(2, 4), arr(State.BLOCKED_OUT, State.BUSY))
    return sq.finish(17)[-1]


def test_bytes_round_trip_and_equality() -> None:
    s = _sample()
    b = s.to_bytes()
    back = SubQueueSummary.from_bytes(b)
    assert back == s
    assert back is not s
    assert back != SubQueueSummary.from_bytes(reducer([0], [], period=7.0).finish(7)[0].to_bytes())
    assert len(b) < 200  # sparse histograms keep it small
    key, many = decode_summaries(encode_summaries(42, [s, back]))
    assert key == 42
    assert many == [s, s]
    assert decode_summaries(encode_summaries(-1, [])) == (-1, [])


@pytest.mark.parametrize(
    ("mangle", "match"),
    [
        (lambda b: b[:10], "truncated"),
        (lambda b: b[:-1], "header says"),
        (lambda b: b + b"x", "header says"),
        (lambda b: b"XXXX" + b[4:], "bad magic"),
        (lambda b: b[:4] + b"\x09\x00" + b[6:], "version"),
        (lambda b: b[:6] + b"\x08\x00" + b[8:], "flags"),
    ],
)
def test_corrupt_summary_is_refused(mangle, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SummaryFormatError, match=match):
        SubQueueSummary.from_bytes(mangle(_sample().to_bytes()))


def test_summary_format_error_is_a_value_error() -> None:
    assert issubclass(SummaryFormatError, ValueError)
    assert issubclass(SummaryFormatError, StreamscopeError)
    good = encode_summaries(1, [_sample()])
    for bad in (good[:-3], good + b"\x00", b"SSQB" + good[4:12], b"nope" + good[4:]):
        with pytest.raises(SummaryFormatError):
            decode_summaries(bad)


def test_a_refined_grid_keeps_closed_frames_and_continues_from_them() -> None:
    sq = SubQueueFrames()
    sq.set_grid(0, 10)
    sq.add_insertions(arr(1, 12, 25, 33), seq(4))
    (f0,) = sq.close_until(10)
    assert (f0.start_ticks, f0.end_ticks) == (0, 10)
    sq.set_grid(1, 11)  # a better fit: frame k now starts at 1 + 11 k
    f1, f2 = sq.close_until(34)
    assert (f1.start_ticks, f1.end_ticks) == (10, 23)  # starts where frame 0 ended
    assert (f2.start_ticks, f2.end_ticks) == (23, 34)
    assert (f0.n_in, f1.n_in, f2.n_in) == (1, 1, 2)
    assert int(f1.level_ticks.sum()) == 13 and int(f2.level_ticks.sum()) == 11


def test_items_refused_at_the_end_count_on_a_grid_that_starts_before_zero() -> None:
    """A device clock reads below the host's grid origin: with no frame closed yet, the items
    refused after the last kept record still land inside the last frame, not at tick 0."""
    sq = SubQueueFrames(1.0)
    sq.set_grid(-1_000.0, 400.0)
    sq.add_insertions(np.array([-900, -800], np.int64), np.array([1, 2], np.int64))
    sq.know_insertions(5)  # items 3..5 refused by a full ring
    frames = sq.finish(-250)
    assert sum(s.n_in for s in frames) == 5


def test_a_batch_of_summaries_is_deflated_and_a_bad_one_refused() -> None:
    """A host ships a summary per channel end and frame: the batch is deflated (its counts
    compress several times over), and what does not inflate to whole summaries is refused."""
    import struct
    import zlib

    sq = SubQueueFrames(1.0, profile=128)
    sq.set_grid(0.0, 1_000_000.0)
    t = np.arange(0, 1_000_000, 97, dtype=np.int64)
    seq = np.arange(1, len(t) + 1, dtype=np.int64)
    sq.add_insertions(t, seq)
    sq.add_removals(t + 50, seq)
    summaries = sq.close_until(1_000_000)
    body = encode_summaries(7, summaries)
    plain = sum(len(s.to_bytes()) for s in summaries)
    assert len(body) * 2 < plain
    key, back = decode_summaries(body)
    assert key == 7 and back == summaries
    head = body[: struct.calcsize("<4sHHqI")]
    for bad in (body[:-3], head + b"not deflated", head + zlib.compress(b"\0" * 80_000_000, 9)):
        with pytest.raises(SummaryFormatError):
            decode_summaries(bad)
