"""Per-channel and per-stage event streams, turned into segments and per-item values.

In: tail/head (or state) records in virtual ns, in any batch order but each stream advanced only
up to a watermark. Out: piecewise-constant segments (start, end, level) and event values
(inter-insertion, inter-departure, latency), with the state that spans batches carried over.
Every operation is on whole arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)


@dataclass(slots=True)
class Segments:
    start: I64
    end: I64
    level: I64


@dataclass(slots=True)
class Events:
    t: I64
    value: I64


@dataclass(slots=True)
class ChannelOutput:
    occupancy: Segments
    insertions: I64  # times of insertions
    removals: I64  # times of removals
    interinsertion: Events
    interdeparture: Events
    latency: Events
    late: int = 0
    unmatched: int = 0


def _segments(last_t: int, carry: int, t: I64, levels: I64, until: int) -> Segments:
    starts = np.concatenate(([last_t], t))
    ends = np.concatenate((t, [until]))
    lv = np.concatenate(([carry], levels))
    keep = ends > starts
    return Segments(starts[keep], ends[keep], lv[keep])


@dataclass(slots=True)
class _Pending:
    t: list[I64] = field(default_factory=list)
    seq: list[I64] = field(default_factory=list)

    def add(self, t: I64, seq: I64) -> None:
        self.t.append(t)
        self.seq.append(seq)

    def take(self, until: int) -> tuple[I64, I64]:
        """Remove and return (sorted by time) everything before ``until``."""
        if not self.t:
            return _EMPTY, _EMPTY
        t = np.concatenate(self.t)
        s = np.concatenate(self.seq)
        order = np.argsort(t, kind="stable")
        t, s = t[order], s[order]
        cut = int(np.searchsorted(t, until, side="left"))
        self.t = [t[cut:]] if cut < len(t) else []
        self.seq = [s[cut:]] if cut < len(t) else []
        return t[:cut], s[:cut]


class ChannelStream:
    """One channel. Occupancy at time t is (items inserted by t) - (items removed by t), read
    from the sequence numbers the taps record, so a refused record delays but never corrupts it."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._tail = _Pending()
        self._head = _Pending()
        self.last_t = 0
        self.tail_seq = 0
        self.head_seq = 0
        self._last_insert: int | None = None
        self._last_remove: int | None = None
        self._open_seq = _EMPTY  # inserted, not yet removed: sequence numbers ...
        self._open_t = _EMPTY  # ... and insertion times

    def add(self, end: str, t_ns: I64, seq: I64) -> int:
        """Queue records of one end; returns how many arrived too late (before the last advance)."""
        late = t_ns < self.last_t
        n_late = int(late.sum())
        if n_late:
            t_ns, seq = t_ns[~late], seq[~late]
        (self._tail if end == "tail" else self._head).add(t_ns, seq)
        return n_late

    def advance(self, until: int) -> ChannelOutput:
        until = max(until, self.last_t)
        tt, ts = self._tail.take(until)
        ht, hs = self._head.take(until)
        # Merge both ends in time order; at equal times insertions go first.
        t = np.concatenate((tt, ht))
        is_tail = np.concatenate((np.ones(len(tt), bool), np.zeros(len(ht), bool)))
        order = np.lexsort((~is_tail, t))
        t, is_tail = t[order], is_tail[order]
        seqs = np.concatenate((ts, hs))[order]
        tail_run = (
            np.maximum.accumulate(np.where(is_tail, seqs, self.tail_seq)) if len(t) else _EMPTY
        )
        head_run = (
            np.maximum.accumulate(np.where(~is_tail, seqs, self.head_seq)) if len(t) else _EMPTY
        )
        levels = np.maximum(tail_run - head_run, 0)
        occ = _segments(self.last_t, self.tail_seq - self.head_seq, t, levels, until)
        if len(t):
            self.tail_seq = int(tail_run[-1])
            self.head_seq = int(head_run[-1])
        self.last_t = until
        ii = self._diffs(tt, "_last_insert")
        dd = self._diffs(ht, "_last_remove")
        lat, unmatched = self._latency(tt, ts, ht, hs)
        return ChannelOutput(occ, tt, ht, ii, dd, lat, 0, unmatched)

    def _diffs(self, t: I64, attr: str) -> Events:
        if not len(t):
            return Events(_EMPTY, _EMPTY)
        prev: int | None = getattr(self, attr)
        setattr(self, attr, int(t[-1]))
        if prev is None:
            return Events(t[1:], np.diff(t))
        return Events(t, np.diff(t, prepend=prev))

    def _latency(self, tt: I64, ts: I64, ht: I64, hs: I64) -> tuple[Events, int]:
        """Time in channel of each removed item: FIFO order pairs removal k with insertion k."""
        if len(ts):
            self._open_seq = np.concatenate((self._open_seq, ts))
            self._open_t = np.concatenate((self._open_t, tt))
        if not len(hs):
            return Events(_EMPTY, _EMPTY), 0
        idx = np.searchsorted(self._open_seq, hs)
        idx_c = np.minimum(idx, max(len(self._open_seq) - 1, 0))
        found = (
            (idx < len(self._open_seq)) & (self._open_seq[idx_c] == hs)
            if len(self._open_seq)
            else np.zeros(len(hs), bool)
        )
        lat_t = ht[found]
        lat_v = ht[found] - self._open_t[idx_c[found]]
        keep = self._open_seq > hs.max()
        self._open_seq, self._open_t = self._open_seq[keep], self._open_t[keep]
        return Events(lat_t, lat_v), int((~found).sum())


class StageStream:
    """One stage's state records → segments of constant state."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._pending = _Pending()
        self.last_t = 0
        self.state = 0  # idle until the first record

    def add(self, t_ns: I64, state: I64) -> int:
        late = t_ns < self.last_t
        n_late = int(late.sum())
        if n_late:
            t_ns, state = t_ns[~late], state[~late]
        self._pending.add(t_ns, state)
        return n_late

    def advance(self, until: int) -> Segments:
        until = max(until, self.last_t)
        t, s = self._pending.take(until)
        seg = _segments(self.last_t, self.state, t, s, until)
        if len(s):
            self.state = int(s[-1])
        self.last_t = until
        return seg
