"""Traced function calls on a timeline: ENTER/EXIT records paired into nested call slices, and
every state slice's and call's begin and end in an order that nests on each track.

In: the trace probes' records in virtual ns (``timeline.build_timeline`` converts them). Out:
``Calls`` columns, and ``SliceEvents`` for the writers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import Kind
from streamscope.core.topology import ProbeInfo
from streamscope.export.tracks import I64, Calls, SliceEvents, Slices, Timeline

_ENTER, _EXIT = int(Kind.ENTER), int(Kind.EXIT)


#: Paired calls of one or more probes' ENTER/EXIT streams, as int64 columns: probe, start_ns,
#: end_ns, function, depth, and the positions of each call's enter and exit in its probe's
#: nesting order.
Paired = tuple[I64, I64, I64, I64, I64, I64, I64]


def _paired(cols: list[NDArray[Any]]) -> Paired:
    a = [np.asarray(x, dtype=np.int64) for x in cols]
    return a[0], a[1], a[2], a[3], a[4], a[5], a[6]


def pair_calls(
    probe: NDArray[np.int32], kinds: NDArray[np.int8], t_ns: I64, fid: I64, end_ns: int
) -> tuple[Paired, int, int]:
    """Calls from ENTER/EXIT records (``kinds``: ENTER, else EXIT; ``fid``: the function id)
    sorted by probe, then in recorded (time) order: each EXIT
    closes its probe's innermost open call if that is of the same function, else it is skipped
    (counted in ``unmatched``); a call open at the end ends at ``end_ns`` (or its probe's last
    record, if later). Returns the calls sorted by probe, then enter position; ``unmatched``;
    and how many calls were still open.

    Vectorised: depth from cumulative sums, an EXIT below the running minimum orphaned, each
    depth's enters and exits paired in order. A probe where that pairs different functions
    (a stream that is not well nested) is replayed by ``pair_calls_stack``, its exact twin.
    """
    n = len(probe)
    if not n:
        return _no_calls(), 0, 0
    nest = _nesting(probe, kinds)
    cols, row_group, open_group, bad = _vectorised(nest, probe, t_ns, fid, end_ns)
    unmatched, still_open = int(nest.orphan.sum()), len(open_group)
    if len(bad):
        redo = np.isin(nest.gid, bad)
        sub, unmatched_b, open_b = pair_calls_stack(
            probe[redo], kinds[redo], t_ns[redo], fid[redo], end_ns
        )
        keep = ~np.isin(row_group, bad)
        cols = [np.concatenate([a[keep], b]) for a, b in zip(cols, sub, strict=True)]
        unmatched += unmatched_b - int(nest.orphan[redo].sum())
        still_open += open_b - int(np.isin(open_group, bad).sum())
    order = np.lexsort((cols[5], cols[0]))
    return _paired([a[order] for a in cols]), unmatched, still_open


@dataclass(frozen=True, slots=True)
class _Nesting:
    """Per record of ENTER/EXIT streams sorted by probe: ``enter``; ``first`` of its probe's
    records and the probe's group ``gid`` (its ``starts`` and ``lasts`` records); ``orphan``
    (an EXIT with no call open: skipped); ``depth_after``, the calls open after it, orphans not
    counted; ``closed``, an ENTER whose call a later EXIT closes."""

    enter: NDArray[np.bool_]
    first: NDArray[np.bool_]
    gid: I64
    starts: I64
    lasts: I64
    orphan: NDArray[np.bool_]
    depth_after: I64
    closed: NDArray[np.bool_]


def _nesting(probe: NDArray[np.int32], kinds: NDArray[np.int8]) -> _Nesting:
    """Depths from cumulative sums, an EXIT below the running minimum orphaned."""
    n = len(probe)
    enter = kinds == _ENTER
    first = np.r_[True, probe[1:] != probe[:-1]]
    gid = np.cumsum(first) - 1
    starts = np.flatnonzero(first)
    lasts = np.r_[starts[1:], n] - 1
    step = np.where(enter, 1, -1).astype(np.int64)
    csum = np.cumsum(step)
    level = csum - (csum - step)[starts][gid]  # open calls after each record, orphans counted
    # A running minimum per probe: each probe's values shifted below all earlier probes'.
    big = np.int64(2 * n + 2)
    off = gid.astype(np.int64) * big
    low = np.minimum(np.minimum.accumulate(level - off) + off, 0)
    before = np.where(first, 0, np.r_[0, low[:-1]])
    orphan = ~enter & (level < before)
    depth_after = level - low
    # an ENTER is closed if its probe's level later drops below its own (suffix minimum)
    suffix = np.minimum.accumulate((depth_after + off)[::-1])[::-1] - off
    closed = enter & np.r_[(suffix[1:] < depth_after[:-1]) & ~first[1:], False]
    return _Nesting(enter, first, gid, starts, lasts, orphan, depth_after, closed)


def _vectorised(
    nest: _Nesting, probe: NDArray[np.int32], t_ns: I64, fid: I64, end_ns: int
) -> tuple[list[NDArray[Any]], I64, I64, I64]:
    """Each depth's enters and exits paired in order, and the calls still open: the calls'
    columns (as ``Paired``, unsorted), each call's probe group, each open call's group, and the
    groups where that pairs different functions (not well nested)."""
    enter, gid, depth_after = nest.enter, nest.gid, nest.depth_after
    ent = np.flatnonzero(nest.closed)
    ext = np.flatnonzero(~enter & ~nest.orphan)
    # per probe and depth, enters and exits alternate: the k-th enter pairs with the k-th exit
    # (an enter's depth is one less than its depth_after, an exit's is its depth_after)
    ent = ent[np.lexsort((ent, depth_after[ent] - 1, gid[ent]))]
    ext = ext[np.lexsort((ext, depth_after[ext], gid[ext]))]
    bad = np.unique(gid[ent[fid[ent] != fid[ext]]])
    kept = ~nest.orphan
    kpos = np.cumsum(kept) - 1
    kpos -= (kpos - kept + 1)[nest.starts][gid]  # position among its probe's kept records
    opened = np.flatnonzero(enter & ~nest.closed)
    # open calls end after all of their probe's records, innermost first
    n_kept = kpos[nest.lasts] + 1
    opened = opened[np.lexsort((-depth_after[opened], gid[opened]))]
    o_first = np.r_[True, gid[opened][1:] != gid[opened][:-1]] if len(opened) else opened > 0
    o_rank = np.arange(len(opened)) - np.flatnonzero(o_first)[np.cumsum(o_first) - 1]
    probe_end = np.maximum(np.int64(end_ns), t_ns[nest.lasts])
    e = np.concatenate([ent, opened])
    cols = [
        probe[e],
        t_ns[e],
        np.concatenate([t_ns[ext], probe_end[gid[opened]]]),
        fid[e],
        depth_after[e] - 1,
        kpos[e],
        np.concatenate([kpos[ext], n_kept[gid[opened]] + o_rank]),
    ]
    return cols, gid[e], gid[opened], bad


def pair_calls_stack(
    probe: NDArray[np.int32], kinds: NDArray[np.int8], t_ns: I64, fid: I64, end_ns: int
) -> tuple[Paired, int, int]:
    """``pair_calls`` as a call stack replayed record by record: the reference the tests run
    side by side with it, and its fallback for streams that are not well nested (a Python loop
    over records, so only there)."""
    rows: list[tuple[int, int, int, int, int, int, int]] = []
    unmatched = still_open = 0
    n = len(probe)
    p_list, k_list, t_list, f_list = (a.tolist() for a in (probe, kinds, t_ns, fid))
    i = 0
    while i < n:
        j = i
        while j < n and p_list[j] == p_list[i]:
            j += 1
        stack: list[tuple[int, int, int]] = []  # (fid, start, position)
        pos = 0
        for k in range(i, j):
            if k_list[k] == _ENTER:
                stack.append((f_list[k], t_list[k], pos))
                pos += 1
            elif stack and stack[-1][0] == f_list[k]:
                f, t0, p0 = stack.pop()
                rows.append((p_list[k], t0, t_list[k], f, len(stack), p0, pos))
                pos += 1
            else:
                unmatched += 1
        end = max(end_ns, t_list[j - 1])
        while stack:
            f, t0, p0 = stack.pop()
            rows.append((p_list[i], t0, end, f, len(stack), p0, pos))
            pos += 1
            still_open += 1
        i = j
    rows.sort(key=lambda r: (r[0], r[5]))
    return _paired(list(np.array(rows, dtype=np.int64).reshape(-1, 7).T)), unmatched, still_open


def _no_calls() -> Paired:
    return _paired([np.zeros(0, dtype=np.int64)] * 7)


def call_records(
    probes: Sequence[ProbeInfo], probe_ids: NDArray[np.int32], kinds: NDArray[np.int8]
) -> NDArray[np.bool_]:
    """Which records are trace probes' ENTER/EXIT records: calls, not instants."""
    trace_ids = np.array([p.id for p in probes if p.kind == "trace"], dtype=np.int32)
    out: NDArray[np.bool_] = np.isin(probe_ids, trace_ids) & ((kinds == _ENTER) | (kinds == _EXIT))
    return out


def call_slices(
    probe_ids: NDArray[np.int32],
    kinds: NDArray[np.int8],
    ns: I64,
    values: I64,
    probe_tid: NDArray[np.int32],
    duration_ns: int,
) -> tuple[Calls, int, int]:
    """The trace probes' ENTER/EXIT records (already in virtual ns) as ``Calls`` on their
    stages' threads; also how many records closed nothing and how many calls stayed open.
    A stage has one trace probe (its one thread's calls), so each thread's calls nest."""
    order = np.lexsort((np.arange(len(ns)), ns, probe_ids))  # ties: as recorded
    (probe, start, end, fid, depth, pos_b, pos_e), unmatched, still_open = pair_calls(
        probe_ids[order], kinds[order], ns[order], values[order], duration_ns
    )
    tid = probe_tid[probe]
    shown = tid > 0  # a probe of no known stage: nowhere to show it
    # global ranks: each probe's positions after those of the probes before it (by thread)
    o = np.lexsort((pos_b, probe, tid))
    o = o[shown[o]]
    probe_o = probe[o]
    first = np.r_[True, probe_o[1:] != probe_o[:-1]] if len(o) else np.zeros(0, dtype=bool)
    sizes = np.diff(np.r_[np.flatnonzero(first), len(o)]) * 2
    base = (np.cumsum(sizes) - sizes)[np.cumsum(first) - 1] if len(o) else pos_b[o]
    calls = Calls(
        tid=tid[o].astype(np.int32),
        start_ns=start[o],
        end_ns=end[o],
        function=fid[o],
        depth=depth[o].astype(np.int32),
        seq_begin=(base + pos_b[o]).astype(np.int64),
        seq_end=(base + pos_e[o]).astype(np.int64),
    )
    return calls, unmatched, still_open


def call_tracks(slices: Slices, calls: Calls) -> tuple[I64, tuple[int, ...]]:
    """Where each call sits among its thread's state slices, and the threads whose calls do not
    fit inside them.

    A call's slot orders its events among state slice events at equal times: ``4 i + 1`` for
    inside the thread's ``i``-th state slice (whose begin and end are ``4 i`` and
    ``4 i + 2``), ``-1`` before the first, ``4 n`` after the last. A call goes where its
    outermost enclosing call goes. A thread has calls crossing a state slice's bounds if an
    outermost call is in none of those places: its calls go on a track of their own.
    """
    slot = np.zeros(len(calls), dtype=np.int64)
    if not len(calls):
        return slot, ()
    idx = np.arange(len(calls))
    root = np.maximum.accumulate(np.where(calls.depth == 0, idx, 0))
    split = []
    # one pass per stage thread (a handful), each vectorised over its calls
    for tid in np.unique(calls.tid).tolist():
        m = calls.tid == tid
        ms = slices.tid == tid
        s_start, s_end = slices.start_ns[ms], slices.end_ns[ms]
        o = np.lexsort((np.arange(len(s_start)), s_start))
        s_start, s_end = s_start[o], s_end[o]
        r = root[m]
        r_start, r_end = calls.start_ns[r], calls.end_ns[r]
        n = len(s_start)
        if not n:
            continue
        i = np.searchsorted(s_start, r_start, side="right") - 1
        inside = (i >= 0) & (r_end <= s_end[np.maximum(i, 0)])
        before = r_end <= s_start[0]
        after = r_start >= s_end[-1]
        if not (inside | before | after).all():
            split.append(int(tid))
            continue
        slot[m] = np.where(inside, 4 * i + 1, np.where(before, -1, 4 * n))
    return slot, tuple(split)


def nest_events(tl: Timeline) -> SliceEvents:
    """Every state slice's and call's begin and end, per track in time order; at equal times
    in an order that nests: a call inside a state slice between its begin and end, calls as
    their records came, a zero-length slice's begin before its end."""
    s, c = tl.slices, tl.calls
    slot, _ = call_tracks(s, c)
    split = np.isin(c.tid, np.array(tl.call_tracks, dtype=np.int32))
    slot[split] = 0
    o = np.lexsort((np.arange(len(s)), s.start_ns, s.tid))
    first = np.r_[True, s.tid[o][1:] != s.tid[o][:-1]] if len(s) else np.zeros(0, dtype=bool)
    ordinal = np.empty(len(s), dtype=np.int64)
    ordinal[o] = np.arange(len(s)) - np.flatnonzero(first)[np.cumsum(first) - 1]
    ns, nc = len(s), len(c)
    tid = np.concatenate([s.tid, s.tid, c.tid, c.tid]).astype(np.int32)
    own = np.concatenate([np.zeros(2 * ns, dtype=bool), split, split])
    t = np.concatenate([s.start_ns, s.end_ns, c.start_ns, c.end_ns]).astype(np.int64)
    begin = np.concatenate([np.ones(ns, bool), np.zeros(ns, bool), np.ones(nc, bool)])
    begin = np.concatenate([begin, np.zeros(nc, dtype=bool)])
    call = np.concatenate([np.zeros(2 * ns, dtype=bool), np.ones(2 * nc, dtype=bool)])
    index = np.concatenate([np.arange(ns), np.arange(ns), np.arange(nc), np.arange(nc)])
    slots = np.concatenate([4 * ordinal, 4 * ordinal + 2, slot, slot])
    seq = np.concatenate([np.zeros(2 * ns, dtype=np.int64), c.seq_begin, c.seq_end])
    order = np.lexsort((seq, slots, t, own, tid))
    return SliceEvents(
        tid=tid[order],
        calls_track=own[order],
        t_ns=t[order],
        begin=begin[order],
        call=call[order],
        index=index[order].astype(np.int64),
    )


def slice_labels(tl: Timeline, ev: SliceEvents, function_base: int) -> I64:
    """Per slice event, an index into a writer's names: a state slice's state code, or
    ``function_base`` plus a call's function id."""
    label = np.zeros(len(ev), dtype=np.int64)
    label[~ev.call] = tl.slices.state[ev.index[~ev.call]]
    label[ev.call] = function_base + tl.calls.function[ev.index[ev.call]]
    return label
