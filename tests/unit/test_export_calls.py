"""Traced calls in the export timeline: ENTER/EXIT pairing (vectorised against its stack twin)
and the begin/end order of state slices and calls on each track (every track must nest)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.core.records import Kind
from streamscope.export.calls import (
    call_slices,
    call_tracks,
    nest_events,
    pair_calls,
    pair_calls_stack,
)
from streamscope.export.tracks import Calls, Instants, Slices, Timeline

ENTER, EXIT = int(Kind.ENTER), int(Kind.EXIT)


STEPS = st.lists(
    st.tuples(st.sampled_from([0, 0, 1, 3]), st.integers(0, 9), st.integers(1, 4)), max_size=40
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[list[int], list[int], list[int], list[int]]:
    """Records of 1-3 probes (probe, kind, t_ns, fid), each in time order (ties included):
    nested calls, with orphan exits, calls left open and, sometimes, exits of the wrong
    function."""
    rows: list[tuple[int, int, int, int]] = []
    corrupt = draw(st.booleans())
    for p in range(1, draw(st.integers(1, 3)) + 1):
        t = draw(st.integers(0, 5))
        stack: list[int] = []
        for dt, action, f in draw(STEPS):
            t += dt
            if action >= 5 or (not stack and action >= 1):
                stack.append(f)
                rows.append((p, ENTER, t, f))
            else:
                # the innermost call's function (or an orphan's, or a wrong one)
                g = stack.pop() if stack else f
                rows.append((p, EXIT, t, f if corrupt and action == 0 else g))
    probe, kinds, ts, fids = ([r[i] for r in rows] for i in range(4))
    return probe, kinds, ts, fids


def _arrays(
    s: tuple[list[int], list[int], list[int], list[int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    p, k, t, f = s
    return (
        np.array(p, dtype=np.int32),
        np.array(k, dtype=np.int8),
        np.array(t, dtype=np.int64),
        np.array(f, dtype=np.int64),
    )


@settings(max_examples=200)
@given(streams(), st.integers(0, 200))
def test_vectorised_pairing_equals_the_call_stack(
    s: tuple[list[int], list[int], list[int], list[int]], end_ns: int
) -> None:
    args = _arrays(s)
    got, unmatched, still_open = pair_calls(*args, end_ns)
    want, unmatched_w, still_open_w = pair_calls_stack(*args, end_ns)
    assert (unmatched, still_open) == (unmatched_w, still_open_w)
    for a, b in zip(got, want, strict=True):
        assert a.tolist() == b.tolist()


def test_orphans_are_skipped_and_open_calls_end_at_the_end() -> None:
    # probe 1: an orphan EXIT, f1 { f2 {} f2 {} } f1 { f3 (open) (open)
    p = [1] * 9
    k = [EXIT, ENTER, ENTER, EXIT, ENTER, EXIT, EXIT, ENTER, ENTER]
    t = [0, 1, 2, 3, 4, 5, 6, 7, 8]
    f = [9, 1, 2, 2, 2, 2, 1, 1, 3]
    (probe, start, end, fid, depth, pos_b, pos_e), unmatched, still_open = pair_calls(
        *_arrays((p, k, t, f)), 100
    )
    assert (unmatched, still_open) == (1, 2)
    assert probe.tolist() == [1] * 5
    assert fid.tolist() == [1, 2, 2, 1, 3]
    assert start.tolist() == [1, 2, 4, 7, 8]
    assert end.tolist() == [6, 3, 5, 100, 100]
    assert depth.tolist() == [0, 1, 1, 0, 1]
    assert pos_b.tolist() == [0, 1, 3, 6, 7]
    assert pos_e.tolist() == [5, 2, 4, 9, 8]  # open calls close innermost first


def _timeline(slices: Slices, calls: Calls, split: tuple[int, ...]) -> Timeline:
    i64, i32 = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
    return Timeline(
        name="t", run_id="r", status="completed", duration_ns=1000, started_unix_ns=0,
        traced=True, flight_overwritten=0, processes=[], threads=[], slices=slices, counters=[],
        instants=Instants(i32, i64, np.zeros(0, dtype=np.int8), i64, i32), domains=[],
        calls=calls, functions=("m:a", "m:b"), call_tracks=split,
    )  # fmt: skip


def _check_nesting(tl: Timeline) -> None:
    ev = nest_events(tl)
    assert len(ev) == 2 * (len(tl.slices) + len(tl.calls))
    seen: set[tuple[bool, int]] = set()
    tracks = sorted(set(zip(ev.tid.tolist(), ev.calls_track.tolist(), strict=True)))
    for tid, own in tracks:
        m = (ev.tid == tid) & (ev.calls_track == own)
        assert np.all(np.diff(ev.t_ns[m]) >= 0)
        stack: list[tuple[bool, int]] = []
        for t, begin, call, i in zip(
            ev.t_ns[m].tolist(), ev.begin[m].tolist(), ev.call[m].tolist(),
            ev.index[m].tolist(), strict=True,
        ):  # fmt: skip
            src = tl.calls if call else tl.slices
            if begin:
                assert t == src.start_ns[i]
                stack.append((call, i))
                seen.add((call, i))
            else:
                assert t == src.end_ns[i]
                assert stack.pop() == (call, i)
        assert not stack
    assert len(seen) == len(tl.slices) + len(tl.calls)


@settings(max_examples=200)
@given(streams(), st.lists(st.integers(0, 4), max_size=12), st.integers(0, 10))
def test_slices_and_calls_nest_on_every_track(
    s: tuple[list[int], list[int], list[int], list[int]], gaps: list[int], t0: int
) -> None:
    probe, kinds, ts, fids = _arrays(s)
    calls, _, _ = call_slices(probe, kinds, ts, fids, np.arange(4, dtype=np.int32), 60)
    # threads 1 and 2 have state slices: contiguous, from t0 (zero lengths included), the last
    # to the run's end; thread 3 has none
    bounds = np.cumsum([t0, *gaps]).astype(np.int64)
    end = np.r_[bounds[1:], max(int(bounds[-1]), 60)].astype(np.int64)
    n = len(bounds)
    slices = Slices(
        np.repeat(np.array([1, 2], dtype=np.int32), n),
        np.tile(bounds, 2),
        np.tile(end, 2),
        (np.arange(2 * n) % 4).astype(np.int8),
    )
    _, split = call_tracks(slices, calls)
    _check_nesting(_timeline(slices, calls, split))


def test_calls_crossing_state_slices_get_their_own_track() -> None:
    slices = Slices(
        np.array([1, 1], dtype=np.int32),
        np.array([0, 10], dtype=np.int64),
        np.array([10, 20], dtype=np.int64),
        np.array([1, 0], dtype=np.int8),
    )
    probe_tid = np.array([0, 1], dtype=np.int32)
    inside = _arrays(([1, 1, 1, 1], [ENTER, ENTER, EXIT, EXIT], [2, 10, 10, 10], [1, 2, 2, 1]))
    calls, _, _ = call_slices(*inside, probe_tid, 20)
    slot, split = call_tracks(slices, calls)
    assert split == () and slot.tolist() == [1, 1]
    _check_nesting(_timeline(slices, calls, split))
    across = _arrays(([1, 1], [ENTER, EXIT], [5, 15], [1, 1]))
    calls, _, _ = call_slices(*across, probe_tid, 20)
    _, split = call_tracks(slices, calls)
    assert split == (1,)
    _check_nesting(_timeline(slices, calls, split))
