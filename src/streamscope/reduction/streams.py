"""Per-stage and per-probe event streams, and what every stream shares, turned into segments
and per-item values that feed the reducers.

In: state or value records in virtual ns, in any batch order but each stream advanced only up to
a watermark, and the times at which a probe reported refused records. Out: piecewise-constant
segments (start, end, level; level -1 where refused records make it unknown) and event values,
handed to the reducers of their (metric, target) through each stream's one hook, ``feed``. Every
operation is on whole arrays. Channels' streams are in ``reduction/channelstream.py``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.frames import split_at_frames
from streamscope.aggregate.stateframes import StateFrame
from streamscope.core.records import NO_STATE, STATE_LABELS

I64 = NDArray[np.int64]
EMPTY = np.zeros(0, dtype=np.int64)
#: Level of a segment whose value is unknown: records were refused during it, or its worker
#: was gone (its process ended, or its work was over: a record of ``NO_STATE``).
UNKNOWN = NO_STATE


@dataclass(frozen=True, slots=True)
class Segments:
    """Piecewise-constant levels: ``level`` holds over [``start``, ``end``) (ns)."""

    start: I64
    end: I64
    level: I64


@dataclass(frozen=True, slots=True)
class Events:
    """Values at times (ns)."""

    t: I64
    value: I64


class Sink(Protocol):
    """What a stream hands its output to: a (query, target) reducer (``reduction/reducers.py``)."""

    def add_segments(self, seg: Segments) -> None: ...

    def add_level(self, level: int, start_ns: int, end_ns: int) -> None: ...

    def add_events(self, ev: Events) -> None: ...

    def add_times(self, ev: Events) -> None: ...

    def add_quality(
        self, violations: I64, uncertainty_ns: float, start_ns: int, end_ns: int
    ) -> None: ...


#: The reducers of a (metric, target) pair (none when no query asks for it).
Reducers = Callable[[str, str], Iterable[Sink]]


class Stream(ABC):
    """Records of one stage, channel or value probe, reduced as the watermark passes them.

    ``reduce`` is the one path from records to reducers: it advances the stream to the
    watermark and hands what that gave to ``feed``, the hook each kind of stream implements to
    say which part of its output each metric's reducers take. A new metric of a stream touches
    only that stream's ``feed``. Records arrive through ``add`` (those before ``last_t`` are too
    late: dropped, and counted by the caller), refusals through ``refuse``.
    """

    last_t: int

    @abstractmethod
    def add(self, t_ns: I64, value: I64) -> None:
        """Records at ``t_ns`` (virtual ns) with their values."""

    def refuse(self, t_report: int) -> None:  # noqa: B027 (a hook: most streams ignore it)
        """The probe refused records some time before ``t_report``."""

    def note_refused(self, seq: int, t_report: int) -> None:  # noqa: B027 (a hook, as ``refuse``)
        """The latest record the probe refused before ``t_report`` carried ``seq``."""

    def reduce(self, until: int, reducers: Reducers) -> None:
        """Advance to ``until`` and feed what that gave to ``reducers``."""
        since = self.last_t
        self.feed(self.advance(until), reducers, since, until)

    @abstractmethod
    def advance(self, until: int) -> object:
        """Everything before ``until``, reduced to this stream's output."""

    @abstractmethod
    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        """The hook: hand each part of ``out`` (from ``advance`` over [since, until)) to the
        reducers of its metric."""


def frame_pieces(seg: Segments, frame_ns: int) -> tuple[I64, I64, I64, I64] | None:
    """``seg``'s known segments (refused records' unknown ones left out) cut at frame edges:
    each piece's frame, level, length and start (ns); None when none is known."""
    known = seg.level >= 0
    if not known.any():
        return None
    start, end = seg.start[known], seg.end[known]
    idx, frames, dur = split_at_frames(start, end, frame_ns)
    return frames, seg.level[known][idx], dur, np.maximum(start[idx], frames * frame_ns)


def segments(last_t: int, carry: int, t: I64, levels: I64, until: int) -> Segments:
    starts = np.concatenate(([last_t], t))
    ends = np.concatenate((t, [until]))
    lv = np.concatenate(([carry], levels))
    keep = ends > starts
    return Segments(starts[keep], ends[keep], lv[keep])


def mask_unknown(seg: Segments, lo: I64, hi: I64) -> None:
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
class Pending:
    """Records not reduced yet (mutable: they come and go as the watermark moves)."""

    t: list[I64] = field(default_factory=list)
    seq: list[I64] = field(default_factory=list)

    def add(self, t: I64, seq: I64) -> None:
        self.t.append(t)
        self.seq.append(seq)

    def merged(self) -> tuple[I64, I64]:
        if not self.t:
            return EMPTY, EMPTY
        t = np.concatenate(self.t) if len(self.t) > 1 else self.t[0]
        s = np.concatenate(self.seq) if len(self.seq) > 1 else self.seq[0]
        if len(t) > 1 and not bool(np.all(t[1:] >= t[:-1])):
            # One tap writes in time order; only several writers of one end (a queue shared by
            # processes) or late batches need sorting.
            order = np.argsort(t, kind="stable")
            t, s = t[order], s[order]
        self.t, self.seq = [t], [s]
        return t, s

    def pop_before(self, until: int) -> tuple[I64, I64]:
        """Remove and return (sorted by time) everything before ``until``."""
        t, s = self.merged()
        cut = int(np.searchsorted(t, until, side="left"))
        self.t = [t[cut:]] if cut < len(t) else []
        self.seq = [s[cut:]] if cut < len(t) else []
        return t[:cut], s[:cut]


class Gaps:
    """Spans of one probe's timeline where it refused records (so its values there are unknown).

    A refusal is reported with the records kept before it, so its gap starts at the last record
    at or before the report and ends at the probe's first record after the report.
    """

    def __init__(self) -> None:
        self.open: list[tuple[int, int]] = []  # (gap start, report time)

    def report(self, t_report: int, pending: Pending, last_t: int, floor: int) -> None:
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


class StageStream(Stream):
    """One stage's (or one worker of it's) state records → segments of constant state (UNKNOWN
    where records were refused); feeds ``state`` reducers, and keeps the ns spent in each state
    (``spent_ns``: index the state, last: unknown) for the per-worker breakdown."""

    def __init__(self, name: str, start_ns: int | None = None) -> None:
        """``start_ns``: the stage appeared during the run (a worker entering a drop-in stage):
        nothing is known of it before its first record, nor reduced before ``start_ns``."""
        self.name = name
        self._pending = Pending()
        self._gaps = Gaps()
        self.last_t = start_ns or 0
        self.last_record_t = self.last_t
        self.state = 0 if start_ns is None else UNKNOWN  # idle until the first record
        self.gone = False  # the worker's process ended: nothing is known after its last record
        self.spent_ns = [0] * (len(STATE_LABELS) + 1)
        self.first_record_t = -1  # when its first record came (-1: none yet)

    def add(self, t_ns: I64, value: I64) -> None:
        late = t_ns < self.last_t
        if late.any():
            t_ns, value = t_ns[~late], value[~late]
        self._pending.add(t_ns, value)

    def refuse(self, t_report: int) -> None:
        self._gaps.report(t_report, self._pending, self.last_record_t, self.last_t)

    def end(self) -> None:
        """The worker is gone (its process ended; its records are all in): after its last
        record it is in no state at all, not idle."""
        self.gone = True

    def advance(self, until: int) -> Segments:
        until = max(until, self.last_t)
        t, s = self._pending.pop_before(until)
        seg = segments(self.last_t, self.state, t, s, until)
        lo, hi = self._gaps.close(t, until)
        mask_unknown(seg, lo, hi)
        if len(s):
            self.state = int(s[-1])
            self.last_record_t = int(t[-1])
            if self.first_record_t < 0:
                self.first_record_t = int(t[0])
        if self.gone and not len(self._pending.merged()[0]):
            seg.level[seg.start >= self.last_record_t] = UNKNOWN
            self.state = UNKNOWN
        self.last_t = until
        return seg

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        assert isinstance(out, Segments)
        for r in reducers("state", self.name):
            r.add_segments(out)
        if len(out.start):
            lengths = out.end - out.start
            for level in range(len(STATE_LABELS)):
                self.spent_ns[level] += int(lengths[out.level == level].sum())
            odd = (out.level < 0) | (out.level >= len(STATE_LABELS))
            self.spent_ns[-1] += int(lengths[odd].sum())


class SummarizedStage(StageStream):
    """A stage whose states its host reduced to frames itself (``aggregate.stateframes``): each
    frame's time in each state, laid out over the frame's span as segments in that proportion
    (all a duty needs); a span that no frame reached is unknown. The latest frame's state and
    the time of the stage's latest record (mapped from the host's ticks) are what the stall
    watch reads: a stall is seen a frame late at most."""

    def __init__(self, name: str, frame_ns: int) -> None:
        super().__init__(name)
        self.frame_ns = frame_ns
        self.frames: dict[int, StateFrame] = {}
        self.state = UNKNOWN

    def add(self, t_ns: I64, value: I64) -> None:
        """Records do not come (its host keeps them); any that do are left out."""

    def add_frames(self, frames: Iterable[StateFrame], to_ns: Callable[[int], int]) -> None:
        """Frames from the host; ``to_ns`` maps its ticks to virtual ns."""
        latest: StateFrame | None = None
        for f in frames:
            self.frames[f.frame] = f
            latest = f if latest is None or f.frame > latest.frame else latest
            if self.first_record_t < 0:  # its first record came in this frame
                self.first_record_t = f.frame * self.frame_ns
        if latest is not None and latest.last_record == latest.last_record:  # not NaN
            self.state = latest.end_state
            self.last_record_t = to_ns(int(latest.last_record))

    def advance(self, until: int) -> Segments:
        until = max(until, self.last_t)
        starts: list[int] = []
        levels: list[int] = []
        t = self.last_t
        while t < until:
            k = t // self.frame_ns
            end = min((k + 1) * self.frame_ns, until)
            fr = self.frames.get(k)
            if fr is None:
                starts.append(t)
                levels.append(UNKNOWN)
            else:
                at = float(t)
                for level, share in enumerate(fr.shares()):
                    if share > 0:
                        starts.append(round(at))
                        levels.append(level if level < len(STATE_LABELS) else UNKNOWN)
                        at += share * (end - t)
            if end == (k + 1) * self.frame_ns:
                self.frames.pop(k, None)
            t = end
        self.last_t = until
        start = np.array(starts, dtype=np.int64)
        return Segments(start, np.append(start[1:], until).astype(np.int64) if len(start) else
                        EMPTY, np.array(levels, dtype=np.int64))  # fmt: skip


#: Metric of each probe kind whose records are values, reduced as they are (no pairing).
EVENT_METRICS: dict[str, str] = {
    "sampler": "sample",
    "counter": "counter",
    "timer": "timer",
    "iteration": "iteration",
    "input_wait": "input_wait",
    "output_wait": "output_wait",
}


class EventStream(Stream):
    """One value probe's records → events at their times, up to a watermark.

    ``scale``: values are durations in the probe's clock ticks, multiplied into ns. A counter's
    records hold its running total: the events are its increments.
    """

    def __init__(self, metric: str, target: str, scale: float | None = None) -> None:
        self.metric = metric
        self.target = target
        self.scale = scale
        self.cumulative = metric == "counter"
        self._pending = Pending()
        self._total = 0
        self.last_t = 0

    def add(self, t_ns: I64, value: I64) -> None:
        late = t_ns < self.last_t
        if late.any():
            t_ns, value = t_ns[~late], value[~late]
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
        t, v = self._pending.pop_before(until)
        self.last_t = until
        return Events(t, v)

    def feed(self, out: object, reducers: Reducers, since: int, until: int) -> None:
        assert isinstance(out, Events)
        for r in reducers(self.metric, self.target):
            r.add_events(out)
