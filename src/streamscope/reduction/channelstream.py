"""A channel's two ends' records, paired into occupancy, latency and inter-event times.

In: tail and head records (insertion and removal sequence numbers) in virtual ns, in any batch
order but advanced only up to a watermark, and the times at which either end's probe refused
records. Out: a ``ChannelOutput`` per advance, fed to the reducers of every channel metric.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamscope.query.metrics import METRICS
from streamscope.reduction.streams import (
    EMPTY,
    I64,
    Events,
    Gaps,
    Pending,
    Reducers,
    Segments,
    Stream,
    mask_unknown,
    segments,
)


@dataclass(frozen=True, slots=True)
class ChannelOutput:
    """One advance of a channel."""

    occupancy: Segments
    insertions: Events  # time of each insertion record, and how many items it accounts for
    removals: Events  # the same for removals
    interinsertion: Events
    interdeparture: Events
    latency: Events
    unmatched: int = 0
    #: Times at which the timeline broke causality: a removal before its insertion (a negative
    #: latency, or more items removed than inserted). Only clocks can cause it; it is counted.
    violations: I64 = field(default_factory=lambda: EMPTY)
    #: Half-widths of the time bounds of both ends' records, added: a latency's uncertainty.
    uncertainty_ns: float = 0.0


#: Metrics a channel's frames may carry the clocks' quality figures for (a crossing channel).
QUALITY_METRICS = tuple(m.name for m in METRICS.values() if m.quality)
#: Each channel metric: the ``ChannelOutput`` field its reducers take, and how.
CHANNEL_FEEDS = tuple((m.name, m.output, f"add_{m.feed}") for m in METRICS.values() if m.output)


def merge_ends(tt: I64, ts: I64, ht: I64, hs: I64) -> tuple[I64, NDArray[np.bool_], I64]:
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


class End:
    """One end of a channel: its pending records, carried last record and refusal gaps."""

    def __init__(self) -> None:
        self.pending = Pending()
        self.gaps = Gaps()
        self.last_t = 0  # time of the last record taken (the run's start before any)
        self.last_seq = 0
        self.last_event: int | None = None
        #: The highest sequence number known at this end (kept, late or refused), and when it
        #: was known: items past the last kept record are still counted from it.
        self.top = 0
        self.top_t = 0

    def note_refused(self, seq: int, t: int) -> None:
        if seq > self.top:
            self.top, self.top_t = seq, t

    def pop_before(self, until: int) -> tuple[I64, I64, I64, I64]:
        """(times, seqs, items each record accounts for, previous record time) before ``until``."""
        t, s = self.pending.pop_before(until)
        prev_seq = np.concatenate(([self.last_seq], s[:-1])) if len(s) else EMPTY
        prev_t = np.concatenate(([self.last_t], t[:-1])) if len(t) else EMPTY
        items = s - prev_seq
        if len(t):
            self.last_seq = max(self.last_seq, int(s.max()))
            self.last_t = int(t[-1])
        return t, s, items, prev_t


class ChannelStream:
    """One channel. Occupancy at time t is (items inserted by t) - (items removed by t), read
    from the sequence numbers the taps record. Where one end refused records, the times of
    some insertions or removals are lost: those spans are reported as unknown, never guessed.
    Its records come through its two ends (``ChannelEnd``); like every ``Stream`` it reduces
    through ``reduce`` and feeds its reducers through its one hook, ``feed``."""

    def __init__(self, name: str, start_ns: int = 0, appeared: bool = False) -> None:
        """``start_ns``: the channel appeared during the run, empty (nothing before is reduced);
        ``appeared``: it was declared while the run went on, ``start_ns`` the watermark then,
        which may be before the program made it (the monitor had no record yet): it begins
        with its first record instead (``Routes.route``)."""
        self.name = name
        #: Declared during the run and no record of it seen yet.
        self.unheard = appeared
        self.ends = {"tail": End(), "head": End()}
        for e in self.ends.values():
            e.last_t = start_ns
        self.last_t = start_ns
        #: When the channel appeared (records from before are what it already held then).
        self.start_ns = start_ns
        #: Probes of its ends, and those whose rings their writers closed (its queue dropped).
        self.probes: set[int] = set()
        self.closed_probes: set[int] = set()
        #: Per end, for each batch of records added: its earliest and latest times and how far
        #: its records may lie from their times (kept until the stream has advanced past it).
        self._halfwidth: dict[str, list[tuple[int, int, float]]] = {"tail": [], "head": []}
        self._open_seq = EMPTY  # inserted, not yet removed: sequence numbers ...
        self._open_t = EMPTY  # ... and insertion times
        #: Where the channel notes that something came for it to reduce (records, a refusal,
        #: bounds): its routes' set of stirred channels (``Routes.reduce``).
        self.stirred: set[ChannelStream] = set()

    def add(self, end: str, t_ns: I64, seq: I64) -> int:
        """Queue records of one end; returns how many arrived too late (before the last advance)."""
        if len(seq):
            i = int(np.argmax(seq))
            self.ends[end].note_refused(int(seq[i]), int(t_ns[i]))
        self.stirred.add(self)
        late = t_ns < self.last_t
        n_late = int(late.sum())
        if n_late:
            t_ns, seq = t_ns[~late], seq[~late]
        self.ends[end].pending.add(t_ns, seq)
        return n_late

    def rewind(self, start_ns: int) -> None:
        """Records from before the channel appeared came before anything of it was reduced:
        it begins at ``start_ns`` instead (empty then), so that the time its first items
        waited for a consumer counts in its occupancy as it does in their latency."""
        self.start_ns = self.last_t = start_ns
        for e in self.ends.values():
            e.last_t = start_ns

    @property
    def rewindable(self) -> bool:
        """Nothing of the channel was reduced yet (so none of its frames went out)."""
        return self.last_t == self.start_ns

    def absorb(self, end: str, t_ns: I64, seq: I64) -> None:
        """Records from before the channel appeared (insertions made before its consumer was
        known, recorded when it was): no frame before it has the channel, so they are what it
        held when it appeared, carried as its level and, for latency, its items' insertion
        times."""
        if not len(seq):
            return
        e = self.ends[end]
        e.last_seq = max(e.last_seq, int(seq.max()))
        if end == "tail":
            seqs = np.concatenate((self._open_seq, seq))
            times = np.concatenate((self._open_t, t_ns))
            order = np.argsort(seqs, kind="stable")
            self._open_seq, self._open_t = seqs[order], times[order]
        else:
            keep = self._open_seq > int(seq.max())
            self._open_seq, self._open_t = self._open_seq[keep], self._open_t[keep]

    def note_uncertainty(
        self, end: str, halfwidth_ns: float, earliest_ns: int, latest_ns: int
    ) -> None:
        """The records just added at ``end``, from ``earliest_ns`` to ``latest_ns``, are
        placed in time within ± ``halfwidth_ns``."""
        self.stirred.add(self)
        self._halfwidth[end].append((earliest_ns, latest_ns, halfwidth_ns))

    def _uncertainty(self, since: int, until: int) -> float:
        """How far the records of [since, until) may lie from their times, both ends added
        (the widest of the batches that may hold one); batches wholly before ``until`` are
        done with."""
        total = 0.0
        for end, batches in self._halfwidth.items():
            total += max((hw for lo, hi, hw in batches if lo < until and hi >= since), default=0.0)
            self._halfwidth[end] = [b for b in batches if b[1] >= until]
        return total

    def add_refusal(self, end: str, t_report: int, seq: int | None = None) -> None:
        """The probe at ``end`` refused records some time before ``t_report``, the latest of
        them (if known) the insertion or removal numbered ``seq``."""
        self.stirred.add(self)
        e = self.ends[end]
        e.gaps.report(t_report, e.pending, e.last_t, self.last_t)
        if seq is not None:
            e.note_refused(seq, t_report)

    def unrecorded(self, end: str, end_ns: int) -> Events:
        """At the end of the run: the items of ``end`` that no record kept or will account
        for (refused or late after the last kept record), at the time they were known to have
        happened (clamped into the run). Every record must have been added before."""
        e = self.ends[end]
        pt, ps = e.pending.merged()
        have = max(e.last_seq, int(ps[pt < end_ns].max(initial=0)))
        if e.top <= have:
            return Events(EMPTY, EMPTY)
        at = min(max(e.top_t, self.last_t), max(end_ns - 1, self.last_t))
        return Events(np.array([at], dtype=np.int64), np.array([e.top - have], dtype=np.int64))

    def advance(self, until: int) -> ChannelOutput:
        until = max(until, self.last_t)
        since = self.last_t
        tail, head = self.ends["tail"], self.ends["head"]
        t_carry, h_carry = tail.last_seq, head.last_seq
        tt, ts, t_items, t_prev = tail.pop_before(until)
        ht, hs, h_items, h_prev = head.pop_before(until)
        t, is_tail, seqs = merge_ends(tt, ts, ht, hs)
        tail_run = np.maximum.accumulate(np.where(is_tail, seqs, t_carry)) if len(t) else EMPTY
        head_run = np.maximum.accumulate(np.where(~is_tail, seqs, h_carry)) if len(t) else EMPTY
        raw_levels = tail_run - head_run
        levels = np.maximum(raw_levels, 0)
        occ = segments(self.last_t, max(t_carry - h_carry, 0), t, levels, until)
        # Unknown: between two records of one end whose sequence numbers jump, and refusal gaps.
        lo_parts = [t_prev[t_items > 1], h_prev[h_items > 1]]
        hi_parts = [tt[t_items > 1], ht[h_items > 1]]
        for e, et in ((tail, tt), (head, ht)):
            lo, hi = e.gaps.close(et, until)
            lo_parts.append(lo)
            hi_parts.append(hi)
        mask_unknown(occ, np.concatenate(lo_parts), np.concatenate(hi_parts))
        self.last_t = until
        ii = self._diffs(tt, t_items, tail)
        dd = self._diffs(ht, h_items, head)
        lat, unmatched = self._latency(tt, ts, ht, hs)
        violations = np.concatenate((t[raw_levels < 0], lat.t[lat.value < 0]))
        uncertainty = self._uncertainty(since, until)
        if len(lat.value) and int(lat.value.min()) < 0:
            # An item removed before it was inserted: the clocks' map is off by at least that
            # much here. It is evidence about the map, not a result: the latency is at least 0,
            # and the frame's uncertainty covers the correction.
            uncertainty = max(uncertainty, float(-lat.value.min()))
            lat = Events(lat.t, np.maximum(lat.value, 0))
        return ChannelOutput(
            occ, Events(tt, t_items), Events(ht, h_items), ii, dd, lat, unmatched,
            np.sort(violations), uncertainty,
        )  # fmt: skip

    @staticmethod
    def _diffs(t: I64, items: I64, end: End) -> Events:
        """Time since the previous record of the same end, where no record between is missing."""
        if not len(t):
            return Events(EMPTY, EMPTY)
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
            return Events(EMPTY, EMPTY), 0
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

    def left(self, end_ns: int) -> tuple[int, int]:
        """The items inserted and never removed (as their records say), and their time in the
        channel up to ``end_ns`` (ns, added): what the channel held when it or the run ended."""
        t = self._open_t
        return len(t), int(np.clip(end_ns - t, 0, None).sum()) if len(t) else 0

    def feed(self, out: ChannelOutput, reducers: Reducers, since: int, until: int) -> None:
        name = self.name
        for metric in QUALITY_METRICS:
            for r in reducers(metric, name):
                r.add_quality(out.violations, out.uncertainty_ns, since, until)
        for metric, output, add in CHANNEL_FEEDS:
            for r in reducers(metric, name):
                getattr(r, add)(getattr(out, output))

    def reduce(self, until: int, reducers: Reducers) -> None:
        since = self.last_t
        if self._quiet() and until > since:
            # Nothing came since the last advance: the channel held its level, and nothing
            # else has a value (a program's thousands of idle queues cost little each).
            tail, head = self.ends["tail"], self.ends["head"]
            level = max(tail.last_seq - head.last_seq, 0)
            self.last_t = until
            name = self.name
            for metric in QUALITY_METRICS:
                for r in reducers(metric, name):
                    r.add_quality(EMPTY, 0.0, since, until)
            for r in reducers("occupancy", name):
                r.add_level(level, since, until)
            return
        self.feed(self.advance(until), reducers, since, until)

    def _quiet(self) -> bool:
        """No record, refusal or time bound waits to be reduced at either end."""
        for e in self.ends.values():
            if e.gaps.open or any(len(t) for t in e.pending.t):
                return False
        return not (self._halfwidth["tail"] or self._halfwidth["head"])


class ChannelEnd(Stream):
    """One end (``tail`` or ``head``) of a channel, as its probe's records reach it; the
    channel reduces both ends together (``ChannelStream``), so this end's ``reduce`` does
    nothing."""

    __slots__ = ("channel", "end", "halfwidth_ns")

    def __init__(self, channel: ChannelStream, end: str) -> None:
        self.channel = channel
        self.end = end
        #: How far the records being added may lie from their times (set per batch).
        self.halfwidth_ns = 0.0

    @property
    def last_t(self) -> int:  # type: ignore[override]
        return self.channel.last_t

    def add(self, t_ns: I64, value: I64) -> None:
        self.channel.add(self.end, t_ns, value)
        if len(t_ns):
            self.channel.note_uncertainty(
                self.end, self.halfwidth_ns, int(t_ns.min()), int(t_ns.max())
            )

    def refuse(self, t_report: int) -> None:
        self.channel.add_refusal(self.end, t_report)

    def note_refused(self, seq: int, t_report: int) -> None:
        self.channel.ends[self.end].note_refused(seq, t_report)

    def absorb(self, t_ns: I64, value: I64) -> None:
        self.channel.absorb(self.end, t_ns, value)

    @property
    def start_ns(self) -> int:
        return self.channel.start_ns

    def reduce(self, until: int, reducers: Reducers) -> None:
        """Nothing: the channel reduces both ends at once."""

    def advance(self, until: int) -> object:
        return None

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        """Nothing (see ``reduce``)."""
