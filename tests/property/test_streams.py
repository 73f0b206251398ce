"""Channel and stage streams against a brute-force replay, whatever the batching.

Property: however records are split into batches and however the watermark advances, the
occupancy segments equal the replay of the true history (no time lost or counted twice), and
every removal is paired with its own insertion.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.reduction.channelstream import ChannelStream
from streamscope.reduction.streams import StageStream


def history(
    ops: list[bool], gaps: list[int], capacity: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A valid FIFO history: (insert times, insert seqs, remove times, remove seqs)."""
    t, level, n_in, n_out = 0, 0, 0, 0
    it, iseq, rt, rseq = [], [], [], []
    for put, gap in zip(ops, gaps, strict=False):
        t += gap
        if put and level < capacity:
            n_in += 1
            level += 1
            it.append(t)
            iseq.append(n_in)
        elif not put and level > 0:
            n_out += 1
            level -= 1
            rt.append(t)
            rseq.append(n_out)
    a = np.array
    return a(it, np.int64), a(iseq, np.int64), a(rt, np.int64), a(rseq, np.int64)


def replay(it: np.ndarray, rt: np.ndarray, end: int) -> dict[int, int]:
    """Time at each level over [0, end), by walking events one by one (the oracle)."""
    events = sorted(
        [(t, 1) for t in it.tolist()] + [(t, -1) for t in rt.tolist()], key=lambda e: (e[0], -e[1])
    )
    out: dict[int, int] = {}
    last, level = 0, 0
    for t, d in events:
        out[level] = out.get(level, 0) + t - last
        last, level = t, level + d
    out[level] = out.get(level, 0) + end - last
    return {k: v for k, v in out.items() if v}


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.booleans(), min_size=1, max_size=300),
    gaps=st.lists(st.integers(0, 50), min_size=300, max_size=300),
    capacity=st.integers(1, 6),
    cuts=st.lists(st.integers(0, 15_000), max_size=8),
)
def test_occupancy_and_latency_survive_any_batching(ops, gaps, capacity, cuts) -> None:  # type: ignore[no-untyped-def]
    it, iseq, rt, rseq = history(ops, gaps, capacity)
    end = int(max(it.max(initial=0), rt.max(initial=0))) + 10
    s = ChannelStream("a -> b")
    got: dict[int, int] = {}
    lat: list[int] = []
    fed_i = fed_r = 0
    for w in sorted({*cuts, end}):
        w = min(w, end)
        # Feed everything before the watermark (and, like a real agent, some records after it).
        ni = int(np.searchsorted(it, w + 7))
        nr = int(np.searchsorted(rt, w + 7))
        s.add("tail", it[fed_i:ni], iseq[fed_i:ni])
        s.add("head", rt[fed_r:nr], rseq[fed_r:nr])
        fed_i, fed_r = max(fed_i, ni), max(fed_r, nr)
        out = s.advance(w)
        for lv, a, b in zip(
            out.occupancy.level.tolist(),
            out.occupancy.start.tolist(),
            out.occupancy.end.tolist(),
            strict=True,
        ):
            got[lv] = got.get(lv, 0) + b - a
        lat.extend(out.latency.value.tolist())
    assert got == replay(it, rt, end)
    assert lat == (rt - it[: len(rt)]).tolist()


@settings(max_examples=100, deadline=None)
@given(
    changes=st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3)), max_size=100),
    cuts=st.lists(st.integers(0, 4000), max_size=6),
)
def test_stage_states_cover_the_whole_time(changes, cuts) -> None:  # type: ignore[no-untyped-def]
    t = np.cumsum([g for g, _ in changes]).astype(np.int64)
    v = np.array([s for _, s in changes], dtype=np.int64)
    end = int(t[-1]) + 5 if len(t) else 5
    s = StageStream("x")
    total = 0
    per_state = np.zeros(4, dtype=np.int64)
    fed = 0
    for w in sorted({*[min(c, end) for c in cuts], end}):
        n = int(np.searchsorted(t, w, side="right"))
        s.add(t[fed:n], v[fed:n])
        fed = max(fed, n)
        seg = s.advance(w)
        total += int((seg.end - seg.start).sum())
        np.add.at(per_state, seg.level, seg.end - seg.start)
    assert total == end
    # Oracle: state k holds from its change until the next one; idle before the first.
    expect = np.zeros(4, dtype=np.int64)
    bounds = np.concatenate(([0], t, [end]))
    states = np.concatenate(([0], v))
    np.add.at(expect, states, np.diff(bounds))
    assert per_state.tolist() == expect.tolist()


def test_late_records_are_counted_not_merged() -> None:
    s = ChannelStream("a -> b")
    s.add("tail", np.array([10], np.int64), np.array([1], np.int64))
    s.advance(100)
    late = s.add("tail", np.array([50], np.int64), np.array([2], np.int64))
    assert late == 1


def truth_level_at(it: np.ndarray, rt: np.ndarray, t: np.ndarray) -> np.ndarray:
    """True occupancy just after time t (insertions first at equal times, as the stream merges)."""
    return np.searchsorted(it, t, side="right") - np.searchsorted(rt, t, side="right")


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(st.booleans(), min_size=20, max_size=300),
    gaps=st.lists(st.integers(1, 50), min_size=300, max_size=300),
    capacity=st.integers(1, 6),
    keeps=st.lists(st.integers(0, 8), min_size=1, max_size=20),
    window=st.integers(50, 2000),
    end_refusing=st.sampled_from(["tail", "head"]),
)
def test_refused_records_make_time_unknown_never_wrong(
    ops, gaps, capacity, keeps, window, end_refusing
) -> None:  # type: ignore[no-untyped-def]
    """One end keeps only the first few records of each drain window (as a full tap does; how
    many varies from window to window) and reports the refusal with them, naming the latest
    refused item as a ring does. Every segment the stream calls known has the true level; the
    counts of items are exact, refusals after the last kept record included."""
    it, iseq, rt, rseq = history(ops, gaps, capacity)
    end = int(max(it.max(initial=0), rt.max(initial=0))) + 10
    s = ChannelStream("a -> b")
    known_ok = True
    items = {"tail": 0, "head": 0}
    cursor = {"tail": 0, "head": 0}
    data = {"tail": (it, iseq), "head": (rt, rseq)}
    for i, w_end in enumerate(range(window, end + window, window)):
        keep = keeps[i % len(keeps)]
        for name in ("tail", "head"):
            t, q = data[name]
            n = int(np.searchsorted(t, w_end))
            bt, bq = t[cursor[name] : n], q[cursor[name] : n]
            cursor[name] = n
            if name == end_refusing and len(bt) > keep:
                s.add(name, bt[:keep], bq[:keep])
                s.add_refusal(name, w_end, int(bq[-1]))
            else:
                s.add(name, bt, bq)
        out = s.advance(min(w_end, end))
        occ = out.occupancy
        known = occ.level >= 0
        truth = truth_level_at(it, rt, occ.start[known])
        known_ok &= bool(np.array_equal(truth, occ.level[known]))
        assert occ.level.max(initial=0) <= capacity
        items["tail"] += int(out.insertions.value.sum())
        items["head"] += int(out.removals.value.sum())
    assert known_ok
    for name in ("tail", "head"):
        rest = s.unrecorded(name, end)
        assert ((rest.t >= 0) & (rest.t <= end)).all()
        items[name] += int(rest.value.sum())
    assert items == {"tail": len(it), "head": len(rt)}


def test_late_records_at_the_end_are_still_counted() -> None:
    """A record that arrives after its time was reduced is counted late, and its items are
    still counted: by the next record, or at the end of the run."""
    s = ChannelStream("a -> b")
    s.add("tail", np.array([10, 20], np.int64), np.array([1, 2], np.int64))
    s.advance(100)
    assert s.add("tail", np.array([50, 60], np.int64), np.array([3, 4], np.int64)) == 2
    rest = s.unrecorded("tail", 150)
    assert rest.value.tolist() == [2]
    assert 100 <= int(rest.t[0]) < 150


def test_a_worker_that_is_gone_is_in_no_state_after_its_last_record() -> None:
    s = StageStream("w", start_ns=100)
    s.add(np.array([150, 300], np.int64), np.array([1, 0], np.int64))
    seg = s.advance(200)
    # Unknown before its first record, busy after it.
    assert list(zip(seg.start.tolist(), seg.end.tolist(), seg.level.tolist(), strict=True)) == [
        (100, 150, -1),
        (150, 200, 1),
    ]
    s.end()
    seg = s.advance(500)
    assert seg.level.tolist() == [1, -1]  # busy until its last record (idle, at 300), then gone
    assert s.advance(800).level.tolist() == [-1]
