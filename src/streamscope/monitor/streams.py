"""Per-channel and per-stage event streams, turned into segments and per-item values.

In: tail/head (or state) records in virtual ns, in any batch order but each stream advanced only
up to a watermark, and the times at which a probe reported refused records. Out: piecewise-
constant segments (start, end, level; level -1 where refused records make it unknown) and event
values (inter-insertion, inter-departure, latency, items per record), with the state that spans
batches carried over. Every operation is on whole arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
_EMPTY = np.zeros(0, dtype=np.int64)
#: Level of a segment whose value is unknown because records were refused during it.
UNKNOWN = -1


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
    insertions: Events  # time of each insertion record, and how many items it accounts for
    removals: Events  # the same for removals
    interinsertion: Events
    interdeparture: Events
    latency: Events
    unmatched: int = 0
    #: Times at which the timeline broke causality: a removal before its insertion (a negative
    #: latency, or more items removed than inserted). Only clocks can cause it; it is counted.
    violations: I64 = field(default_factory=lambda: _EMPTY)
    #: Half-widths of the time bounds of both ends' records, added: a latency's uncertainty.
    uncertainty_ns: float = 0.0


def _segments(last_t: int, carry: int, t: I64, levels: I64, until: int) -> Segments:
    starts = np.concatenate(([last_t], t))
    ends = np.concatenate((t, [until]))
    lv = np.concatenate(([carry], levels))
    keep = ends > starts
    return Segments(starts[keep], ends[keep], lv[keep])


def _merge(tt: I64, ts: I64, ht: I64, hs: I64) -> tuple[I64, NDArray[np.bool_], I64]:
    """Merge two time-sorted record streams; at equal times the tail's (insertions) go first.

    Each stream is sorted already, so each record's place is its index plus the number of the
    other stream's records before it: two binary searches instead of a sort.
    """
    n = len(tt) + len(ht)
    pos_t = np.arange(len(tt)) + np.searchsorted(ht, tt, side="left")
    pos_h = np.arange(len(ht)) + np.searchsorted(tt, ht, side="right")
    t = np.empty(n, dtype=np.int64)
    seqs = np.empty(n, dtype=np.int64)
    is_tail = np.zeros(n, dtype=bool)
    t[pos_t], t[pos_h] = tt, ht
    seqs[pos_t], seqs[pos_h] = ts, hs
    is_tail[pos_t] = True
    return t, is_tail, seqs


def _mask_unknown(seg: Segments, lo: I64, hi: I64) -> None:
    """Set the level of every segment that starts inside some [lo, hi) to UNKNOWN."""
    if not len(lo) or not len(seg.start):
        return
    order = np.argsort(lo, kind="stable")
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)  # intervals may overlap: how far any interval so far reaches
    idx = np.searchsorted(lo, seg.start, side="right") - 1
    inside = (idx >= 0) & (seg.start < reach[np.maximum(idx, 0)])
    seg.level[inside] = UNKNOWN


@dataclass(slots=True)
class _Pending:
    t: list[I64] = field(default_factory=list)
    seq: list[I64] = field(default_factory=list)

    def add(self, t: I64, seq: I64) -> None:
        self.t.append(t)
        self.seq.append(seq)

    def merged(self) -> tuple[I64, I64]:
        if not self.t:
            return _EMPTY, _EMPTY
        t = np.concatenate(self.t) if len(self.t) > 1 else self.t[0]
        s = np.concatenate(self.seq) if len(self.seq) > 1 else self.seq[0]
        if len(t) > 1 and not bool(np.all(t[1:] >= t[:-1])):
            # One tap writes in time order; only several writers of one end (a queue shared by
            # processes) or late batches need sorting.
            order = np.argsort(t, kind="stable")
            t, s = t[order], s[order]
        self.t, self.seq = [t], [s]
        return t, s

    def take(self, until: int) -> tuple[I64, I64]:
        """Remove and return (sorted by time) everything before ``until``."""
        t, s = self.merged()
        cut = int(np.searchsorted(t, until, side="left"))
        self.t = [t[cut:]] if cut < len(t) else []
        self.seq = [s[cut:]] if cut < len(t) else []
        return t[:cut], s[:cut]


class _Gaps:
    """Spans of one probe's timeline where it refused records (so its values there are unknown).

    A refusal is reported with the records kept before it, so its gap starts at the last record
    at or before the report and ends at the probe's first record after the report.
    """

    def __init__(self) -> None:
        self.open: list[tuple[int, int]] = []  # (gap start, report time)

    def report(self, t_report: int, pending: _Pending, last_t: int, floor: int) -> None:
        t, _ = pending.merged()
        i = int(np.searchsorted(t, t_report, side="right")) - 1
        start = int(t[i]) if i >= 0 else last_t
        self.open.append((max(start, floor), t_report))

    def close(self, t: I64, until: int) -> tuple[I64, I64]:
        """Unknown intervals up to ``until``, given this advance's records ``t`` of the probe."""
        lo: list[int] = []
        hi: list[int] = []
        still: list[tuple[int, int]] = []
        for start, t_report in self.open:
            j = int(np.searchsorted(t, t_report, side="right"))
            if j < len(t):
                lo.append(start)
                hi.append(int(t[j]))
            else:
                lo.append(start)
                hi.append(until)
                still.append((until, t_report))
        self.open = still
        return np.array(lo, dtype=np.int64), np.array(hi, dtype=np.int64)


class _End:
    """One end of a channel: its pending records, carried last record and refusal gaps."""

    def __init__(self) -> None:
        self.pending = _Pending()
        self.gaps = _Gaps()
        self.last_t = 0  # time of the last record taken (the run's start before any)
        self.last_seq = 0
        self.last_event: int | None = None
        #: The highest sequence number known at this end (kept, late or refused), and when it
        #: was known: items past the last kept record are still counted from it.
        self.top = 0
        self.top_t = 0

    def know(self, seq: int, t: int) -> None:
        if seq > self.top:
            self.top, self.top_t = seq, t

    def take(self, until: int) -> tuple[I64, I64, I64, I64]:
        """(times, seqs, items each record accounts for, previous record time) before ``until``."""
        t, s = self.pending.take(until)
        prev_seq = np.concatenate(([self.last_seq], s[:-1])) if len(s) else _EMPTY
        prev_t = np.concatenate(([self.last_t], t[:-1])) if len(t) else _EMPTY
        items = s - prev_seq
        if len(t):
            self.last_seq = max(self.last_seq, int(s.max()))
            self.last_t = int(t[-1])
        return t, s, items, prev_t


class ChannelStream:
    """One channel. Occupancy at time t is (items inserted by t) - (items removed by t), read
    from the sequence numbers the taps record. Where one end refused records, the times of
    some insertions or removals are lost: those spans are reported as unknown, never guessed."""

    def __init__(self, name: str, start_ns: int = 0) -> None:
        """``start_ns``: the channel appeared during the run, empty (nothing before is reduced)."""
        self.name = name
        self.ends = {"tail": _End(), "head": _End()}
        for e in self.ends.values():
            e.last_t = start_ns
        self.last_t = start_ns
        self._halfwidth = {"tail": 0.0, "head": 0.0}
        self._open_seq = _EMPTY  # inserted, not yet removed: sequence numbers ...
        self._open_t = _EMPTY  # ... and insertion times

    def add(self, end: str, t_ns: I64, seq: I64) -> int:
        """Queue records of one end; returns how many arrived too late (before the last advance)."""
        if len(seq):
            i = int(np.argmax(seq))
            self.ends[end].know(int(seq[i]), int(t_ns[i]))
        late = t_ns < self.last_t
        n_late = int(late.sum())
        if n_late:
            t_ns, seq = t_ns[~late], seq[~late]
        self.ends[end].pending.add(t_ns, seq)
        return n_late

    def note_uncertainty(self, end: str, halfwidth_ns: float) -> None:
        """The records just added at ``end`` are placed in time within ± ``halfwidth_ns``."""
        self._halfwidth[end] = max(self._halfwidth[end], halfwidth_ns)

    def add_refusal(self, end: str, t_report: int, seq: int | None = None) -> None:
        """The probe at ``end`` refused records some time before ``t_report``, the latest of
        them (if known) the insertion or removal numbered ``seq``."""
        e = self.ends[end]
        e.gaps.report(t_report, e.pending, e.last_t, self.last_t)
        if seq is not None:
            e.know(seq, t_report)

    def unrecorded(self, end: str, end_ns: int) -> Events:
        """At the end of the run: the items of ``end`` that no record kept or will account
        for (refused or late after the last kept record), at the time they were known to have
        happened (clamped into the run). Every record must have been added before."""
        e = self.ends[end]
        pt, ps = e.pending.merged()
        have = max(e.last_seq, int(ps[pt < end_ns].max(initial=0)))
        if e.top <= have:
            return Events(_EMPTY, _EMPTY)
        at = min(max(e.top_t, self.last_t), max(end_ns - 1, self.last_t))
        return Events(np.array([at], dtype=np.int64), np.array([e.top - have], dtype=np.int64))

    def advance(self, until: int) -> ChannelOutput:
        until = max(until, self.last_t)
        tail, head = self.ends["tail"], self.ends["head"]
        t_carry, h_carry = tail.last_seq, head.last_seq
        tt, ts, t_items, t_prev = tail.take(until)
        ht, hs, h_items, h_prev = head.take(until)
        t, is_tail, seqs = _merge(tt, ts, ht, hs)
        tail_run = np.maximum.accumulate(np.where(is_tail, seqs, t_carry)) if len(t) else _EMPTY
        head_run = np.maximum.accumulate(np.where(~is_tail, seqs, h_carry)) if len(t) else _EMPTY
        raw_levels = tail_run - head_run
        levels = np.maximum(raw_levels, 0)
        occ = _segments(self.last_t, max(t_carry - h_carry, 0), t, levels, until)
        # Unknown: between two records of one end whose sequence numbers jump, and refusal gaps.
        lo_parts = [t_prev[t_items > 1], h_prev[h_items > 1]]
        hi_parts = [tt[t_items > 1], ht[h_items > 1]]
        for e, et in ((tail, tt), (head, ht)):
            lo, hi = e.gaps.close(et, until)
            lo_parts.append(lo)
            hi_parts.append(hi)
        _mask_unknown(occ, np.concatenate(lo_parts), np.concatenate(hi_parts))
        self.last_t = until
        ii = self._diffs(tt, t_items, tail)
        dd = self._diffs(ht, h_items, head)
        lat, unmatched = self._latency(tt, ts, ht, hs)
        violations = np.concatenate((t[raw_levels < 0], lat.t[lat.value < 0]))
        uncertainty = self._halfwidth["tail"] + self._halfwidth["head"]
        if len(lat.value) and int(lat.value.min()) < 0:
            # An item removed before it was inserted: the clocks' map is off by at least that
            # much here. It is evidence about the map, not a result: the latency is at least 0,
            # and the frame's uncertainty covers the correction.
            uncertainty = max(uncertainty, float(-lat.value.min()))
            lat = Events(lat.t, np.maximum(lat.value, 0))
        self._halfwidth = {"tail": 0.0, "head": 0.0}
        return ChannelOutput(
            occ, Events(tt, t_items), Events(ht, h_items), ii, dd, lat, unmatched,
            np.sort(violations), uncertainty,
        )  # fmt: skip

    @staticmethod
    def _diffs(t: I64, items: I64, end: _End) -> Events:
        """Time since the previous record of the same end, where no record between is missing."""
        if not len(t):
            return Events(_EMPTY, _EMPTY)
        prev = end.last_event
        end.last_event = int(t[-1])
        d = np.diff(t, prepend=t[0] if prev is None else prev)
        ok = items == 1
        if prev is None:
            ok[0] = False
        return Events(t[ok], d[ok])

    def _latency(self, tt: I64, ts: I64, ht: I64, hs: I64) -> tuple[Events, int]:
        """Time in channel of each removed item: FIFO order pairs removal k with insertion k."""
        if len(ts):
            self._open_seq = np.concatenate((self._open_seq, ts))
            self._open_t = np.concatenate((self._open_t, tt))
        if not len(hs):
            return Events(_EMPTY, _EMPTY), 0
        n_open = len(self._open_seq)
        idx = np.searchsorted(self._open_seq, hs)
        idx_c = np.minimum(idx, max(n_open - 1, 0))
        if n_open:
            found = (idx < n_open) & (self._open_seq[idx_c] == hs)
        else:
            found = np.zeros(len(hs), bool)
        lat_t = ht[found]
        lat_v = ht[found] - self._open_t[idx_c[found]]
        keep = self._open_seq > hs.max()
        self._open_seq, self._open_t = self._open_seq[keep], self._open_t[keep]
        return Events(lat_t, lat_v), int((~found).sum())


class StageStream:
    """One stage's state records → segments of constant state (UNKNOWN where records were refused)."""

    def __init__(self, name: str, start_ns: int | None = None) -> None:
        """``start_ns``: the stage appeared during the run (a worker entering a drop-in stage):
        nothing is known of it before its first record, nor reduced before ``start_ns``."""
        self.name = name
        self._pending = _Pending()
        self._gaps = _Gaps()
        self.last_t = start_ns or 0
        self.last_record_t = self.last_t
        self.state = 0 if start_ns is None else UNKNOWN  # idle until the first record
        self.gone = False  # the worker's process ended: nothing is known after its last record

    def add(self, t_ns: I64, state: I64) -> int:
        late = t_ns < self.last_t
        n_late = int(late.sum())
        if n_late:
            t_ns, state = t_ns[~late], state[~late]
        self._pending.add(t_ns, state)
        return n_late

    def add_refusal(self, t_report: int) -> None:
        self._gaps.report(t_report, self._pending, self.last_record_t, self.last_t)

    def end(self) -> None:
        """The worker is gone (its process ended; its records are all in): after its last
        record it is in no state at all, not idle."""
        self.gone = True

    def advance(self, until: int) -> Segments:
        until = max(until, self.last_t)
        t, s = self._pending.take(until)
        seg = _segments(self.last_t, self.state, t, s, until)
        lo, hi = self._gaps.close(t, until)
        _mask_unknown(seg, lo, hi)
        if len(s):
            self.state = int(s[-1])
            self.last_record_t = int(t[-1])
        if self.gone and not len(self._pending.merged()[0]):
            seg.level[seg.start >= self.last_record_t] = UNKNOWN
            self.state = UNKNOWN
        self.last_t = until
        return seg


#: Metric of each probe kind whose records are values, reduced as they are (no pairing).
EVENT_METRICS: dict[str, str] = {
    "sampler": "sample",
    "counter": "counter",
    "timer": "timer",
    "iteration": "iteration",
    "input_wait": "input_wait",
    "output_wait": "output_wait",
}


class EventStream:
    """One value probe's records → events at their times, up to a watermark.

    ``scale``: values are durations in the probe's clock ticks, multiplied into ns. A counter's
    records hold its running total: the events are its increments.
    """

    def __init__(self, metric: str, target: str, scale: float | None = None) -> None:
        self.metric = metric
        self.target = target
        self.scale = scale
        self.cumulative = metric == "counter"
        self._pending = _Pending()
        self._total = 0
        self.last_t = 0

    def add(self, t_ns: I64, value: I64) -> None:
        if self.cumulative and len(value):
            # A counter's totals arrive in order (one register, read at each flush).
            inc = np.diff(value, prepend=np.int64(self._total))
            self._total = int(value[-1])
            value = inc
        elif self.scale is not None and self.scale != 1.0:
            value = np.rint(value * self.scale).astype(np.int64)
        self._pending.add(t_ns, value)

    def advance(self, until: int) -> Events:
        until = max(until, self.last_t)
        t, v = self._pending.take(until)
        self.last_t = until
        return Events(t, v)
