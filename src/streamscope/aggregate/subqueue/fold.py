"""The sub-queue reducer's batch step: the records of one sub-queue below a frame boundary and
what earlier batches left (:class:`Carry`) in, one :class:`SubQueueSummary` per frame and the
new carry out. Whole arrays at a time (numpy); the only Python loop is over frames.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.subqueue.gaps import N_GAP_BINS, gap_bins
from streamscope.aggregate.subqueue.summary import SubQueueSummary
from streamscope.core.records import State

__all__ = ["Carry", "Records", "fold"]

I64 = NDArray[np.int64]
Mask = NDArray[np.bool_]

_BLOCKED_OUT = int(State.BLOCKED_OUT)


def _none() -> I64:
    return np.zeros(0, np.int64)


@dataclass(frozen=True, slots=True, eq=False)
class Carry:
    """What the batches folded so far leave for the next one (all ticks in the sub-queue's clock).
    Holds arrays, so it is compared by identity."""

    ins_seq: int = 0  #: last insertion seq
    rem_seq: int = 0  #: last removal seq
    ins_t: int | None = None  #: ticks of the last insertion record
    ins_blocked: int = 0  #: producer's cumulative BLOCKED_OUT ticks at that insertion
    rem_t: int | None = None  #: ticks of the last removal record
    state: int = int(State.IDLE)  #: the producer's state since ``state_t``
    state_t: int = 0
    blocked: int = 0  #: producer's cumulative BLOCKED_OUT ticks at ``state_t``
    live_seq: I64 = field(default_factory=_none)  #: items inserted and not yet removed
    live_t: I64 = field(default_factory=_none)  #: ... and their insertion ticks


class Records(NamedTuple):
    """One batch of records in time order: (ticks, seq) of each end, (ticks, state) of the producer."""

    ins_t: I64
    ins_s: I64
    rem_t: I64
    rem_s: I64
    st_t: I64
    st_v: I64


class _Levels(NamedTuple):
    """The level over time: one step per event or frame start, in time order."""

    level: I64  #: items in the sub-queue after each step
    dur: I64  #: ticks until the next step
    offsets: I64  #: start of each frame's steps (``nf + 1``)
    n_in: I64  #: items inserted in each frame
    n_out: I64  #: items removed in each frame
    level_start: I64  #: level at each frame start
    ins_seq: int  #: last insertion seq after the batch
    rem_seq: int


class _End(NamedTuple):
    """One end's records (insertions or removals) with their frames and gaps."""

    t: I64
    seq: I64
    frame: I64  #: frame of each record (-1: before the grid)
    prev_t: I64  #: ticks of the record before (-1 for a first record)
    ok: Mask  #: its gap counts: the items are consecutive and the record is in a frame
    bins: I64  #: gap bin of each record
    items: I64  #: items each record stands for (refused ones before it included)
    sub: I64 | None  #: profile sub-window of each record, with a profile
    offsets: I64  #: start of each frame's records (``nf + 1``)


class _Blocked(NamedTuple):
    """The producer's cumulative time in BLOCKED_OUT, from its state records."""

    t: I64
    state: I64
    in_bo: I64
    cum: I64

    def at(self, t: I64) -> I64:
        j = np.maximum(np.searchsorted(self.t, t, side="right") - 1, 0)
        out: I64 = self.cum[j] + np.maximum(t - self.t[j], 0) * self.in_bo[j]
        return out


def _frame_of(seg: I64, t: I64) -> I64:
    out: I64 = np.searchsorted(seg, t, side="right") - 1
    return out


def _frame_slices(fr: I64, nf: int) -> I64:
    """Start offsets of frames ``0..nf`` in a non-decreasing frame array (``-1`` entries first)."""
    out: I64 = np.searchsorted(fr, np.arange(nf + 1), side="left").astype(np.int64)
    return out


def _levels(rec: Records, carry: Carry, seg: I64) -> _Levels:
    """Events plus frame starts (ordered first at equal ticks), their levels and durations."""
    nf, ni, nr = seg.size - 1, rec.ins_t.size, rec.rem_t.size
    t_all = np.concatenate((rec.ins_t, rec.rem_t, seg[:-1]))
    prio = np.concatenate(
        (np.zeros(ni, np.int64), np.ones(nr, np.int64), np.full(nf, -1, np.int64))
    )
    order = np.lexsort((prio, t_all))
    t_sorted = t_all[order]
    zeros_i, zeros_r = np.zeros(ni, np.int64), np.zeros(nr, np.int64)
    zeros_f = np.zeros(nf, np.int64)
    i_val = np.concatenate(([carry.ins_seq], rec.ins_s, zeros_r, zeros_f))
    r_val = np.concatenate(([carry.rem_seq], zeros_i, rec.rem_s, zeros_f))
    perm = np.concatenate(([0], order + 1))
    i_after = np.maximum.accumulate(i_val[perm])[1:]
    r_after = np.maximum.accumulate(r_val[perm])[1:]
    level = np.maximum(i_after - r_after, 0)
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    bpos = inv[ni + nr :]
    i_end = int(i_after[-1]) if i_after.size else carry.ins_seq
    r_end = int(r_after[-1]) if r_after.size else carry.rem_seq
    return _Levels(
        level=level,
        dur=np.diff(np.append(t_sorted, int(seg[-1]))),
        offsets=_frame_slices(_frame_of(seg, t_sorted), nf),
        n_in=np.diff(np.append(i_after[bpos], i_end)),
        n_out=np.diff(np.append(r_after[bpos], r_end)),
        level_start=level[bpos],
        ins_seq=i_end,
        rem_seq=r_end,
    )


def _blocked(rec: Records, carry: Carry) -> _Blocked:
    s_t = np.concatenate(([carry.state_t], rec.st_t))
    s_v = np.concatenate(([carry.state], rec.st_v))
    in_bo = (s_v == _BLOCKED_OUT).astype(np.int64)
    cum = carry.blocked + np.concatenate(([0], np.cumsum(np.diff(s_t) * in_bo[:-1])))
    return _Blocked(s_t, s_v, in_bo, cum)


def _sub_windows(t: I64, fr: I64, grid: I64, k: int) -> I64:
    """The profile sub-window (of ``k``) of each record: sub-window ``i`` of a frame starts at
    ``(i * span) // k`` ticks into it (records of no frame get a meaningless one)."""
    f = np.maximum(fr, 0)
    span = np.maximum(grid[f + 1] - grid[f], 1)
    out: I64 = ((t - grid[f] + 1) * k - 1) // span
    return out


def _end(
    t: I64, seq: I64, last: tuple[int | None, int], seg: I64, grid: I64, k: int, tick_ns: float
) -> _End:
    """One end's records; ``last``: the ticks (None: none yet) and seq of the record before."""
    last_t, last_seq = last
    fr = _frame_of(seg, t)
    prev_t = np.concatenate(([-1 if last_t is None else last_t], t[:-1]))
    prev_seq = np.concatenate(([last_seq], seq[:-1]))
    ok = (seq == prev_seq + 1) & (fr >= 0)
    if last_t is None and t.size:
        ok[0] = False
    return _End(
        t=t,
        seq=seq,
        frame=fr,
        prev_t=prev_t,
        ok=ok,
        bins=gap_bins((t - prev_t) * tick_ns),
        # its seq over the highest before it: refused records' items count with the next kept
        items=np.diff(np.maximum.accumulate(np.concatenate(([last_seq], seq)))),
        sub=_sub_windows(t, fr, grid, k) if k else None,
        offsets=_frame_slices(fr, seg.size - 1),
    )


def _back_to_back(rem: _End, live_seq: I64, live_t: I64) -> Mask:
    """Removals whose item was inserted by the removal before: their gap is a service time."""
    idx = np.minimum(np.searchsorted(live_seq, rem.seq), max(live_seq.size - 1, 0))
    found = (live_seq[idx] == rem.seq) if live_seq.size else np.zeros(rem.seq.size, np.bool_)
    item_in = live_t[idx] if live_seq.size else np.zeros(rem.seq.size, np.int64)
    out: Mask = found & (item_in <= rem.prev_t)
    return out


def _jumped_frames(end: _End, prev0: int, nf: int) -> Mask:
    """Frames (of ``nf``) holding a record whose sequence number does not follow the one before."""
    prev = np.concatenate(([prev0], end.seq[:-1]))
    f = end.frame[(end.seq != prev + 1) & (end.frame >= 0)]
    out: Mask = np.bincount(f, minlength=nf)[:nf] > 0
    return out


def _histogram(end: _End, bins: I64, j: int) -> I64:
    a, b = int(end.offsets[j]), int(end.offsets[j + 1])
    out: I64 = np.bincount(bins[a:b][end.ok[a:b]], minlength=N_GAP_BINS).astype(np.int64)
    return out


def _profile(end: _End, j: int, k: int) -> I64:
    assert end.sub is not None
    a, b = int(end.offsets[j]), int(end.offsets[j + 1])
    counts = np.bincount(end.sub[a:b], weights=end.items[a:b], minlength=k)
    out: I64 = np.rint(counts).astype(np.int64)
    return out


def _level_ticks(lv: _Levels, j: int) -> I64:
    a, b = int(lv.offsets[j]), int(lv.offsets[j + 1])
    lt = np.bincount(lv.level[a:b], weights=lv.dur[a:b]) if b > a else np.zeros(1)
    lt_i = np.rint(lt).astype(np.int64)
    held = np.flatnonzero(lt_i)
    out: I64 = lt_i[: int(held[-1]) + 1] if held.size else lt_i[:1]
    return out


class _Batch(NamedTuple):
    """Everything one fold computed, from which each frame's summary is cut."""

    first: int  #: the frame number of frame 0 of the batch
    seg: I64  #: the covered part of each frame (``nf + 1`` ticks)
    grid: I64  #: each frame's edges on the grid (``nf + 1`` ticks)
    levels: _Levels
    ins: _End
    rem: _End
    prod_bins: I64 | None  #: production-gap bin of each insertion, with the producer's states
    lossy: Mask
    tick_ns: float
    profile: int

    def summary(self, j: int) -> SubQueueSummary:
        ins, rem, k = self.ins, self.rem, self.profile
        return SubQueueSummary(
            frame=self.first + j,
            start_ticks=int(self.grid[j]),
            end_ticks=int(self.grid[j + 1]),
            covered_ticks=int(self.seg[j + 1] - self.seg[j]),
            n_in=int(self.levels.n_in[j]),
            n_out=int(self.levels.n_out[j]),
            level_start=int(self.levels.level_start[j]),
            level_ticks=_level_ticks(self.levels, j),
            gap_in=_histogram(ins, ins.bins, j),
            gap_out=_histogram(rem, rem.bins, j),
            gap_prod=None if self.prod_bins is None else _histogram(ins, self.prod_bins, j),
            tick_ns=self.tick_ns,
            lossy=bool(self.lossy[j]),
            profile=_profile(ins, j, k) if k else None,
            profile_out=_profile(rem, j, k) if k else None,
        )


def fold(
    rec: Records,
    carry: Carry,
    seg: I64,
    grid: I64,
    first: int,
    *,
    tick_ns: float,
    profile: int,
    states: bool,
) -> tuple[list[SubQueueSummary], Carry]:
    """Frames ``first ..``: frame ``j`` covers ``[seg[j], seg[j+1])`` of grid frame
    ``[grid[j], grid[j+1])``; every record of ``rec`` lies below ``seg[-1]``. ``profile``: the
    sub-windows of each profile (0: none); ``states``: summarise production gaps."""
    nf = seg.size - 1
    levels = _levels(rec, carry, seg)
    blocked = _blocked(rec, carry)
    ins = _end(rec.ins_t, rec.ins_s, (carry.ins_t, carry.ins_seq), seg, grid, profile, tick_ns)
    c_ins = blocked.at(ins.t)
    prod_bins = None
    if states:
        prev_c = np.concatenate(([carry.ins_blocked], c_ins[:-1]))
        prod_bins = gap_bins(((ins.t - ins.prev_t) - (c_ins - prev_c)) * tick_ns)
    live_seq = np.concatenate((carry.live_seq, ins.seq))
    live_t = np.concatenate((carry.live_t, ins.t))
    rem = _end(rec.rem_t, rec.rem_s, (carry.rem_t, carry.rem_seq), seg, grid, profile, tick_ns)
    rem = rem._replace(ok=rem.ok & _back_to_back(rem, live_seq, live_t))
    lossy = _jumped_frames(ins, carry.ins_seq, nf) | _jumped_frames(rem, carry.rem_seq, nf)
    batch = _Batch(first, seg, grid, levels, ins, rem, prod_bins, lossy, tick_ns, profile)
    out = [batch.summary(j) for j in range(nf)]
    rem_seq = max(carry.rem_seq, levels.rem_seq)
    keep = live_seq > rem_seq
    return out, Carry(
        ins_seq=max(carry.ins_seq, levels.ins_seq),
        rem_seq=rem_seq,
        ins_t=int(ins.t[-1]) if ins.t.size else carry.ins_t,
        ins_blocked=int(c_ins[-1]) if ins.t.size else carry.ins_blocked,
        rem_t=int(rem.t[-1]) if rem.t.size else carry.rem_t,
        state=int(blocked.state[-1]),
        state_t=int(blocked.t[-1]),
        blocked=int(blocked.cum[-1]),
        live_seq=live_seq[keep],
        live_t=live_t[keep],
    )
