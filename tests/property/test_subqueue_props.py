"""The streaming sub-queue reducer against a tick-by-tick pure-Python reference.

Random FIFO arrivals and services, random refused records, random producer states, chunked
into add_* calls in random interleavings and closed at random watermarks: every frame's level
time, counts, gap histograms and lossy flag must equal the brute-force ones exactly.
"""

from __future__ import annotations

import dataclasses
import math
import random
import zlib
from dataclasses import dataclass

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.subqueue import (
    GAP_EDGES_NS,
    N_GAP_BINS,
    SubQueueFrames,
    SubQueueSummary,
    SummaryFormatError,
    decode_summaries,
    encode_summaries,
)
from streamscope.aggregate.subqueue.wire import _BATCH_HEAD
from streamscope.core.records import State

_HEAD = _BATCH_HEAD.size  # a batch's head, before its deflated summaries


def ref_bin(d_ns: float) -> int:
    i = 0
    while i + 1 < len(GAP_EDGES_NS) and GAP_EDGES_NS[i + 1] <= d_ns:
        i += 1
    return min(i, N_GAP_BINS - 1)


@dataclass
class Case:
    ins: list[tuple[int, int]]  # kept (ticks, seq)
    rem: list[tuple[int, int]]
    states: list[tuple[int, int]] | None
    origin: float
    period: float
    tick_ns: float
    end: int
    watermarks: list[int]
    grid_at: int  # set_grid before this watermark (len(watermarks): only before finish)


@st.composite
def cases(draw: st.DrawFn, lossy: bool) -> Case:
    n = draw(st.integers(0, 25))
    t = draw(st.integers(-30, 40))
    a: list[int] = []
    d: list[int] = []
    last_d = -(10**9)
    for _ in range(n):
        t += draw(st.integers(0, 12))
        a.append(t)
        last_d = max(t, last_d) + draw(st.integers(0, 12))
        d.append(last_d)
    ins = [(x, k + 1) for k, x in enumerate(a)]
    rem = [(x, k + 1) for k, x in enumerate(d)]
    if lossy:
        keep_i = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        keep_r = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        ins = [r for r, k in zip(ins, keep_i, strict=True) if k]
        rem = [r for r, k in zip(rem, keep_r, strict=True) if k]
    states = None
    if draw(st.booleans()):
        st_t = sorted(draw(st.lists(st.integers(-40, 250), max_size=12)))
        states = [(x, draw(st.sampled_from([int(s) for s in State]))) for x in st_t]
    times = [x for x, _ in ins + rem + (states or [])] or [0]
    origin = draw(st.floats(-20.0, 60.0, allow_nan=False))
    period = draw(st.floats(1.0, 40.0, allow_nan=False))
    end = draw(st.integers(min(times) - 10, max(times) + 40))
    wms = sorted(draw(st.lists(st.integers(min(times) - 20, end), max_size=6)))
    grid_at = draw(st.integers(0, len(wms)))
    tick_ns = draw(st.sampled_from([1.0, 0.37, 3.0]))
    return Case(ins, rem, states, origin, period, tick_ns, end, wms, grid_at)


def bound(c: Case, k: int) -> int:
    return math.floor(c.origin + k * c.period + 0.5)


def reference(c: Case) -> list[SubQueueSummary]:
    ins = [(t, s) for t, s in c.ins if t < c.end]
    rem = [(t, s) for t, s in c.rem if t < c.end]
    states = [(t, s) for t, s in (c.states or []) if t < c.end]
    ins_t = {s: t for t, s in ins}

    def last_seq(recs: list[tuple[int, int]], t: int) -> int:
        return max([s for x, s in recs if x <= t], default=0)

    def level(t: int) -> int:
        return max(last_seq(ins, t) - last_seq(rem, t), 0)

    def blocked(t0: int, t1: int) -> int:  # producer ticks in BLOCKED_OUT over [t0, t1)
        n = 0
        for x in range(t0, t1):
            cur = [s for y, s in states if y <= x]
            n += bool(cur) and cur[-1] == State.BLOCKED_OUT
        return n

    out = []
    k = 0
    while bound(c, k) < c.end:
        s, e = bound(c, k), bound(c, k + 1)
        cov_end = min(e, c.end)
        lt = [0] * (max([level(x) for x in range(s, cov_end)]) + 1)
        for x in range(s, cov_end):
            lt[level(x)] += 1
        h_in = np.zeros(N_GAP_BINS, np.int64)
        h_prod = np.zeros(N_GAP_BINS, np.int64)
        h_out = np.zeros(N_GAP_BINS, np.int64)
        lossy = False
        for i, (t, q) in enumerate(ins):
            prev = ins[i - 1] if i else None
            if s <= t < cov_end:
                lossy |= q != (prev[1] if prev else 0) + 1
                if prev and q == prev[1] + 1:
                    h_in[ref_bin((t - prev[0]) * c.tick_ns)] += 1
                    g = t - prev[0] - blocked(prev[0], t)
                    h_prod[ref_bin(g * c.tick_ns)] += 1
        for i, (t, q) in enumerate(rem):
            prev = rem[i - 1] if i else None
            if s <= t < cov_end:
                lossy |= q != (prev[1] if prev else 0) + 1
                if prev and q == prev[1] + 1 and q in ins_t and ins_t[q] <= prev[0]:
                    h_out[ref_bin((t - prev[0]) * c.tick_ns)] += 1
        out.append(
            SubQueueSummary(
                frame=k,
                start_ticks=s,
                end_ticks=e,
                covered_ticks=cov_end - s,
                n_in=last_seq(ins, cov_end - 1) - last_seq(ins, s - 1),
                n_out=last_seq(rem, cov_end - 1) - last_seq(rem, s - 1),
                level_start=level(s - 1),
                level_ticks=np.array(lt, np.int64),
                gap_in=h_in,
                gap_out=h_out,
                gap_prod=h_prod if c.states is not None else None,
                tick_ns=c.tick_ns,
                lossy=lossy,
            )
        )
        k += 1
    return out


def run(
    c: Case, rng: random.Random, refused: tuple[int, int] | None = None
) -> list[SubQueueSummary]:
    """``refused``: the latest insertion and removal a full ring refused (0: none)."""
    sq = SubQueueFrames(c.tick_ns)
    kinds: dict[str, list[tuple[int, int]]] = {"ins": c.ins, "rem": c.rem}
    if c.states is not None:
        kinds["st"] = c.states
    add = {"ins": sq.add_insertions, "rem": sq.add_removals, "st": sq.add_states}
    ptr = dict.fromkeys(kinds, 0)

    def feed_up_to(w: int | None) -> None:
        chunks: dict[str, list[list[tuple[int, int]]]] = {}
        for name, recs in kinds.items():
            need = len(recs) if w is None else sum(1 for t, _ in recs if t < w)
            target = min(len(recs), max(ptr[name], need + rng.randint(0, 3)))
            part = recs[ptr[name] : target]
            ptr[name] = target
            cuts = sorted(rng.sample(range(len(part) + 1), min(2, len(part) + 1)))
            chunks[name] = [part[: cuts[0]], part[cuts[0] : cuts[-1]], part[cuts[-1] :]]
        order = [name for name, cs in chunks.items() for _ in cs]
        rng.shuffle(order)
        for name in order:
            piece = chunks[name].pop(0)
            add[name](
                np.array([t for t, _ in piece], np.int64), np.array([v for _, v in piece], np.int64)
            )

    got: list[SubQueueSummary] = []
    for i, w in enumerate(c.watermarks):
        if i == c.grid_at:
            sq.set_grid(c.origin, c.period)
        feed_up_to(w)
        got += sq.close_until(w)
    if sq.grid is None:
        sq.set_grid(c.origin, c.period)
    feed_up_to(None)
    if refused is not None:
        sq.know_insertions(refused[0])
        sq.know_removals(refused[1])
    got += sq.finish(c.end)
    return got


def check(c: Case, seed: int) -> None:
    got = run(c, random.Random(seed))
    want = reference(c)
    assert [s.frame for s in got] == list(range(len(got)))
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w, (g, w)
        assert SubQueueSummary.from_bytes(g.to_bytes()) == g


@settings(max_examples=150, deadline=None)
@given(c=cases(lossy=False), seed=st.integers(0, 2**16))
def test_reducer_matches_reference(c: Case, seed: int) -> None:
    check(c, seed)
    got = run(c, random.Random(seed))
    for a, b in zip(got, got[1:], strict=False):
        assert b.level_start == a.level_start + a.n_in - a.n_out
        assert not a.lossy


@settings(max_examples=100, deadline=None)
@given(c=cases(lossy=True), seed=st.integers(0, 2**16))
def test_reducer_matches_reference_with_refused_records(c: Case, seed: int) -> None:
    check(c, seed)


summary_st = st.builds(
    lambda frame, start, span, cov, nin, nout, lv, lt, hists, tick, lossy, prod: SubQueueSummary(
        frame=frame,
        start_ticks=start,
        end_ticks=start + span,
        covered_ticks=min(cov, span),
        n_in=nin,
        n_out=nout,
        level_start=lv,
        level_ticks=np.array(
            [*lt[:-1], min(cov, span) - sum(lt[:-1])]
            if sum(lt[:-1]) < min(cov, span)
            else [min(cov, span)],
            np.int64,
        ),
        gap_in=hists[0],
        gap_out=hists[1],
        gap_prod=hists[2] if prod else None,
        tick_ns=tick,
        lossy=lossy,
    ),
    st.integers(0, 2**40),
    st.integers(-(2**50), 2**50),
    st.integers(1, 2**40),
    st.integers(1, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 2**40),
    st.integers(0, 10**6),
    st.lists(st.integers(0, 1000), min_size=1, max_size=6),
    st.lists(
        st.dictionaries(st.integers(0, N_GAP_BINS - 1), st.integers(1, 2**40), max_size=5).map(
            lambda d: (
                np.bincount(
                    np.array(list(d), np.int64), weights=list(d.values()), minlength=N_GAP_BINS
                ).astype(np.int64)
                if d
                else np.zeros(N_GAP_BINS, np.int64)
            )
        ),
        min_size=3,
        max_size=3,
    ),
    st.floats(1e-3, 1e3, allow_nan=False),
    st.booleans(),
    st.booleans(),
)


@settings(max_examples=100, deadline=None)
@given(s=summary_st)
def test_bytes_round_trip(s: SubQueueSummary) -> None:
    assert SubQueueSummary.from_bytes(s.to_bytes()) == s
    key, back = decode_summaries(encode_summaries(7, [s, s]))
    assert key == 7
    assert back == [s, s]


@settings(max_examples=300, deadline=None)
@given(
    s=summary_st,
    edits=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.one_of(st.none(), st.integers(0, 10**6)),
)
def test_corrupt_bytes_are_refused_or_canonical(
    s: SubQueueSummary, edits: list[tuple[int, int]], cut: int | None
) -> None:
    for data in (s.to_bytes(), encode_summaries(3, [s])):
        b = bytearray(data)
        for pos, val in edits:
            b[pos % len(b)] = val
        if cut is not None:
            b = b[: cut % (len(b) + 1)]
        try:
            if data[:4] == b"SSQF":
                got = SubQueueSummary.from_bytes(bytes(b))
                assert got.to_bytes() == bytes(b)
            else:
                # A deflated stream is not canonical (the bits after its last block pad a byte
                # and are ignored): what was read is canonical, the head and inflated summaries.
                key, many = decode_summaries(bytes(b))
                again = encode_summaries(key, many)
                assert again[:_HEAD] == bytes(b[:_HEAD])
                assert zlib.decompress(again[_HEAD:]) == zlib.decompress(bytes(b[_HEAD:]))
        except SummaryFormatError:
            pass


@settings(max_examples=100, deadline=None)
@given(
    c=cases(lossy=False),
    seed=st.integers(0, 2**16),
    cut_in=st.integers(0, 50),
    cut_out=st.integers(0, 50),
)
def test_items_refused_after_the_last_kept_record_are_still_counted(
    c: Case, seed: int, cut_in: int, cut_out: int
) -> None:
    """Each end's last records (inside the frames) are refused by a full ring, their latest
    sequence number known from the ring: the frames' counts still add up to every insertion and
    removal, as the reference counts them with no record refused."""
    first = bound(c, 0)

    def cut(recs: list[tuple[int, int]], n: int) -> tuple[list[tuple[int, int]], int]:
        inside = [i for i, (t, _) in enumerate(recs) if first <= t < c.end]
        drop = set(inside[len(inside) - min(n, len(inside)) :])
        top = max((recs[i][1] for i in drop), default=0)
        return [r for i, r in enumerate(recs) if i not in drop], top

    ins, top_in = cut(c.ins, cut_in)
    rem, top_out = cut(c.rem, cut_out)
    # An agent's watermarks trail its final flush (the end): the last frame is still open then.
    wms = [w for w in c.watermarks if w < c.end]
    kept = dataclasses.replace(
        c, ins=ins, rem=rem, watermarks=wms, grid_at=min(c.grid_at, len(wms))
    )
    got = run(kept, random.Random(seed), (top_in, top_out))
    want = reference(c)
    assert sum(s.n_in for s in got) == sum(s.n_in for s in want)
    assert sum(s.n_out for s in got) == sum(s.n_out for s in want)
