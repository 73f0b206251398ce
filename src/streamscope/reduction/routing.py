"""Each probe's records to its stream: a channel's end, a stage's worker or a value probe.

In: the run's probes (and those that appear while it runs) and batches of records in virtual ns.
Out: records added to their streams, too-late ones counted as dropped in the ledger, and the
streams reduced through their hook (``reduction/streams.py``) whenever the watermark moves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.frames import runs
from streamscope.aggregate.stateframes import STATE_MAGIC, decode_state_frames
from streamscope.core.records import Kind, Records
from streamscope.core.tablerows import TableSink
from streamscope.core.topology import ProbeInfo
from streamscope.query.metrics import METRICS
from streamscope.reduction.channelstream import ChannelEnd, ChannelStream
from streamscope.reduction.ledger import Ledger
from streamscope.reduction.pathstream import PathEnd, PathStream
from streamscope.reduction.servicetimes import SERVICE_KINDS, ServiceTimes
from streamscope.reduction.stacks import StackCounts
from streamscope.reduction.streams import (
    EVENT_METRICS,
    EventStream,
    Reducers,
    StageStream,
    Stream,
    SummarizedStage,
)


class Routes:
    """The streams of a run, by probe id (mutable: probes appear while a program runs)."""

    def __init__(
        self,
        tick_periods: dict[str, float],
        on_table: TableSink | None = None,
        frame_ns: int = 1_000_000_000,
    ) -> None:
        self.tick_periods = tick_periods
        self.channels: dict[str, ChannelStream] = {}
        #: What each channel held when it (or the run) ended: items, and their ns in it.
        self.left: dict[str, tuple[int, int]] = {}
        #: One per state probe: a stage worked in by several threads or processes (a drop-in
        #: program's pool) has one per worker, and its duty is theirs on average.
        self.stages: dict[int, StageStream] = {}
        #: Per state probe (a worker): the resource it ran on (``worker`` table).
        self.worker_of: dict[int, str] = {}
        #: Value probes (samplers, counters, timers, per-iteration durations), by probe id.
        self.events: dict[int, EventStream] = {}
        self.taps: dict[int, Stream] = {}
        #: Paths followed item by item (``latency(SRC ~> DST)``), by target, and the channel
        #: probes that feed them, by (``depart`` or ``arrive``, channel).
        self.paths: dict[str, PathStream] = {}
        self._path_ends: dict[tuple[str, str], PathEnd] = {}
        #: Workers let go (their threads ended), and how many each stage has here now.
        self.gone_stages: dict[int, StageStream] = {}
        self._workers_of: dict[str, int] = {}
        #: Channels something came for since they were last reduced, and the time up to which
        #: every channel was reduced (``reduce``).
        self._stirred: set[ChannelStream] = set()
        self._synced = 0
        #: Told when a channel begins earlier than it appeared (``route``): its reducers must
        #: emit frames from then. None: records from before a channel appeared are absorbed.
        self.on_rewind: Callable[[str, int], None] | None = None
        #: The service times the workers' trackers sampled, by stage.
        self.service = ServiceTimes()
        #: The stacks the processes' samplers sampled, per frame and stage.
        self.stacks = StackCounts(frame_ns, on_table)

    def add(
        self,
        p: ProbeInfo,
        *,
        start_ns: int | None = None,
        resource: str = "",
        count: bool = True,
        summarized_ns: int | None = None,
    ) -> None:
        """Give probe ``p`` its stream. ``start_ns``: it appeared while the run went on (nothing
        of it is reduced before); ``resource``: where a state probe's worker runs; ``count``:
        a channel end's records are measured (False: a virtual queue's, which its own estimate
        takes instead); ``summarized_ns``: a state probe whose stage's host reduces its states
        to frames of that length and ships those instead of its records."""
        if p.kind in ("tail", "head") and count:
            ch = self.channels.get(p.target)
            if ch is None:
                ch = self.channels[p.target] = ChannelStream(
                    p.target, start_ns or 0, appeared=start_ns is not None
                )
                ch.stirred = self._stirred
            ch.probes.add(p.id)
            self.taps[p.id] = ChannelEnd(ch, p.kind)
        elif p.kind == "state":
            stream = (
                StageStream(p.target, start_ns)
                if summarized_ns is None
                else SummarizedStage(p.target, summarized_ns)
            )
            self.taps[p.id] = self.stages[p.id] = stream
            self.worker_of[p.id] = resource
            self._workers_of[p.target] = self._workers_of.get(p.target, 0) + 1
        elif p.kind == "stacks":
            self.stacks.add_probe(p.id, p.target)
        elif p.kind in ("depart", "arrive"):
            self.taps[p.id] = self._path_ends.setdefault((p.kind, p.target), PathEnd(p.kind))
        elif p.kind in EVENT_METRICS:
            metric = EVENT_METRICS[p.kind]
            durations = METRICS[metric].time_valued
            scale = self.tick_periods.get(p.domain, 1.0) if durations else None
            self.taps[p.id] = self.events[p.id] = EventStream(metric, p.target, scale)

    def add_path(self, name: str, departs: Iterable[str], arrives: Iterable[str]) -> None:
        """Follow path ``name``: its items leave through channels ``departs`` (their ``depart``
        probes) and arrive through ``arrives``."""
        stream = self.paths.setdefault(name, PathStream(name))
        for role, names in (("depart", departs), ("arrive", arrives)):
            for ch in names:
                self._path_ends.setdefault((role, ch), PathEnd(role)).paths.append(stream)

    def take_state_frames(self, payload: bytes, to_ns: Callable[[int], int]) -> bool:
        """A SUMMARY payload of a stage's state frames (from its host's agent, whose ticks
        ``to_ns`` maps) to its stream: whether it was one (else it is a sub-queue's)."""
        if payload[:4] != STATE_MAGIC:
            return False
        probe, frames = decode_state_frames(payload)
        stream = self.stages.get(probe)
        if isinstance(stream, SummarizedStage):
            stream.add_frames(frames, to_ns)
        return True

    def route(
        self, rec: Records, t: NDArray[np.int64], halfwidth: float, ledger: Ledger
    ) -> list[tuple[int, NDArray[np.int64], NDArray[np.int64]]]:
        """Hand each probe's records to its stream (one slice per probe, no per-record loop);
        returns the slices ``(probe, t, values)``, kept or not, for the virtual queues."""
        if not len(rec):
            return []
        rec, t = self._service(rec, t, ledger)
        rec, t = self._stacks(rec, t, ledger)
        probes = rec["probe"].astype(np.int64)
        values = rec["value"].astype(np.int64)
        ids, starts = runs(probes)
        if len(set(ids.tolist())) != len(ids):
            # An agent sends each tap's records together; only a mixed batch needs sorting.
            order = np.argsort(probes, kind="stable")
            probes, values, t = probes[order], values[order], t[order]
            ids, starts = runs(probes)
        bounds = [*starts.tolist(), len(probes)]
        out = []
        for i, pid in enumerate(ids.tolist()):
            pt, pv = t[bounds[i] : bounds[i + 1]], values[bounds[i] : bounds[i + 1]]
            out.append((pid, pt, pv))
            tap = self.taps.get(pid)
            if tap is None:
                ledger.kept(pid, pt)
                continue
            # (each probe's few records a drain: scalars first, masks only where they matter)
            lo = int(pt.min()) if len(pt) else 0
            if isinstance(tap, ChannelEnd) and len(pv):
                top = int(np.argmax(pv))  # a late record's items still count (at the end at worst)
                tap.note_refused(int(pv[top]), int(pt[top]))
                if lo < tap.start_ns or tap.channel.unheard:
                    ch = tap.channel
                    first = max(lo, 0)
                    later = ch.unheard and first > ch.start_ns
                    ch.unheard = False
                    if (
                        self.on_rewind is not None
                        and ch.rewindable
                        and (first < ch.start_ns or later)
                    ):
                        # Items put before the consumer was known, and nothing of the channel
                        # reduced yet: it begins with the first of them. (Or it was declared
                        # before the monitor's time had reached its making: then too.)
                        ch.rewind(first)
                        self.on_rewind(ch.name, first)
                if lo < tap.start_ns:
                    # From before the channel appeared: what it held then, not late.
                    before = pt < tap.start_ns
                    ledger.kept(pid, pt[before])
                    tap.absorb(pt[before], pv[before])
                    pt, pv = pt[~before], pv[~before]
            # Too late to place in time (its span is already reduced): dropped, not recorded.
            if len(pt) and lo < tap.last_t:
                late = pt < tap.last_t
                if late.any():
                    ledger.drop(pid, int(pt[late].min()), int(late.sum()), late=True)
                    pt, pv = pt[~late], pv[~late]
            ledger.kept(pid, pt)
            if isinstance(tap, ChannelEnd | PathEnd):
                tap.halfwidth_ns = halfwidth
            tap.add(pt, pv)
        return out

    def _service(
        self, rec: Records, t: NDArray[np.int64], ledger: Ledger
    ) -> tuple[Records, NDArray[np.int64]]:
        """The state probes' timed items taken out of ``rec`` into ``service`` (counted as
        their probes' records); the rest."""
        svc = np.isin(rec["kind"], SERVICE_KINDS)
        if not svc.any():
            return rec, t
        svc &= np.isin(rec["probe"], np.fromiter(self.stages, np.int64, len(self.stages)))
        if not svc.any():
            return rec, t
        taken, tt = rec[svc], t[svc]
        probes = taken["probe"].astype(np.int64)
        for pid in np.unique(probes).tolist():
            mine = probes == pid
            self.service.take(self.stages[pid].name, taken[mine])
            ledger.kept(pid, np.sort(tt[mine]))
        return rec[~svc], t[~svc]

    def _stacks(
        self, rec: Records, t: NDArray[np.int64], ledger: Ledger
    ) -> tuple[Records, NDArray[np.int64]]:
        """The samplers' stack records taken out of ``rec`` into ``stacks``; the rest."""
        mine = rec["kind"] == Kind.STACK
        if not mine.any():
            return rec, t
        taken, tt = rec[mine], t[mine]
        probes = taken["probe"].astype(np.int64)
        for pid in np.unique(probes).tolist():
            sel = probes == pid
            self.stacks.take(pid, tt[sel], taken["value"][sel].astype(np.int64), self._stage_of)
            ledger.kept(pid, np.sort(tt[sel]))
        return rec[~mine], t[~mine]

    def _stage_of(self, worker: int) -> str | None:
        stream = self.stages.get(worker) or self.gone_stages.get(worker)
        return stream.name if stream is not None else None

    def count_unrecorded(self, end_ns: int, reducers: Reducers) -> None:
        """At the end of the run: the items refused (or late) after each channel end's last
        kept record, counted all the same (at the time they were known); what each channel
        held (``left``); the stacks' last counts written."""
        self.stacks.finish()
        for name, stream in self.channels.items():
            self.left[name] = stream.left(end_ns)
            for end, metric in (("tail", "count"), ("head", "throughput")):
                extra = stream.unrecorded(end, end_ns)
                if len(extra.t):
                    for r in reducers(metric, name):
                        r.add_times(extra)

    def close_probe(self, pid: int) -> str | None:
        """Probe ``pid``'s ring was closed by its writer and drained: the channel whose ends
        are all closed now (None: not a channel end, or an end still open)."""
        tap = self.taps.get(pid)
        if not isinstance(tap, ChannelEnd):
            return None
        ch = tap.channel
        ch.closed_probes.add(pid)
        return ch.name if ch.probes <= ch.closed_probes else None

    def drop_worker(self, pid: int) -> str | None:
        """Let the worker of state probe ``pid`` go (its thread ended, its records reduced):
        its stage when it was the stage's last worker here (the stage ended), else None."""
        stream = self.stages.pop(pid, None)
        self.taps.pop(pid, None)
        if stream is None:
            return None
        self.gone_stages[pid] = stream  # its time in each state, for the run's end tables
        stage = stream.name
        self._workers_of[stage] -= 1
        return stage if self._workers_of[stage] <= 0 else None

    def end_channel(self, name: str, end_ns: int, reducers: Reducers) -> None:
        """A channel ended (its queue dropped, every record of it reduced up to ``end_ns``):
        the items refused after its last records counted, what it held kept (``left``), its
        streams let go."""
        stream = self.channels.pop(name, None)
        if stream is None:
            return
        self.left[name] = stream.left(end_ns)
        for end, metric in (("tail", "count"), ("head", "throughput")):
            extra = stream.unrecorded(end, end_ns)
            if len(extra.t):
                for r in reducers(metric, name):
                    r.add_times(extra)
        for pid in stream.closed_probes:
            self.taps.pop(pid, None)

    def reduce(self, until: int, reducers: Reducers, boundary: int | None = None) -> None:
        """Every stream up to ``until``, fed to ``reducers``. ``boundary``: the latest frame
        boundary at or before ``until`` (no frame after it closes now); while every channel was
        reduced past it, a channel nothing came for waits (a quiet channel's level is fed in
        one piece later), so that thousands of idle channels cost once per frame, not per
        advance."""
        reduced: Iterable[ChannelStream]
        if boundary is None or boundary > self._synced:
            reduced = self.channels.values()
            self._synced = until
        else:
            reduced = [ch for ch in self._stirred if self.channels.get(ch.name) is ch]
        self._stirred.clear()
        for ch in reduced:
            ch.reduce(until, reducers)
            if not ch._quiet():
                self._stirred.add(ch)  # records after ``until`` wait: reduced next time too
        for stream in (*self.stages.values(), *self.events.values(), *self.paths.values()):
            stream.reduce(until, reducers)
        self.stacks.flush(until)
