"""The monitor's reduction engine: records in, frame results and drop counts out.

In: batches of records in raw ticks of their clock domain, from the rings the monitor drains
(``ingest``, with the drain's watermark) and from device agents' messages (``handle``), and the
refusals counted meanwhile. Out: ``FrameResult``s written to a store as soon as the watermark has
passed a frame's end, and ``DropCount``s. Memory stays bounded: records wait only until the
watermark passes them.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.frames import frame_index, runs
from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.aggregate.profile import ProfileBuilder
from streamscope.aggregate.subqueue import decode_summaries
from streamscope.core.records import STATE_LABELS, Kind, Records, State
from streamscope.core.topology import Topology
from streamscope.monitor.flight import DEFAULT_FLIGHT_RECORDS, FlightRecorder
from streamscope.monitor.reducers import TargetReducer
from streamscope.monitor.streams import EVENT_METRICS, ChannelStream, EventStream, StageStream
from streamscope.monitor.virtual import SIDES, virtual_queues
from streamscope.query.compile import Plan, TargetPlan, new_targets
from streamscope.query.metrics import METRICS
from streamscope.timebase.clockmap import HostMap
from streamscope.timebase.domains import HOST, Domains, TableSink
from streamscope.timebase.emulated import CLOCK_TRUTH
from streamscope.transport.wire import WATERMARK_END, Message, MsgType

#: A stage busy this long without a state change is stalled, unless the run says otherwise.
DEFAULT_STALL_NS = 10_000_000_000


@dataclass(slots=True)
class Stall:
    """A stage busy without finishing: since ``start_ns`` (its last state change) to
    ``end_ns`` (as far as the monitor has seen), virtual ns."""

    stage: str
    start_ns: int
    end_ns: int


FrameSink = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]
#: A stage's time figures (``pipeline.worker.LoopStats``), as the ``runner`` table holds them.
RUNNER_FIELDS = ("items", "samples", "user_ns", "cpu_ns")


@dataclass(slots=True)
class _AgentState:
    watermark_ns: int
    ended: bool = False
    domain: str = HOST
    #: It sends records or summaries (a device's agent): frames wait for its watermark.
    data: bool = False


@dataclass(frozen=True, slots=True)
class _Batch:
    """Records of one domain in raw ticks, and refusals noticed at known virtual times."""

    records: Records
    drops: tuple[tuple[int, int, int], ...] = ()  # (probe, t_report_ns, count)


#: ns per event of a probe, and how that was measured (the ``overhead`` table's figures).
CostModel = Callable[[int], tuple[float, str]]


class Engine:
    """Single-threaded: call ``handle`` for each message, then ``advance`` whenever convenient."""

    def __init__(
        self,
        plan: Plan,
        topology: Topology,
        drop_frame_ns: int,
        sink: FrameSink,
        on_table: TableSink | None = None,
        *,
        method: str = "hull",
        truth_dir: str | None = None,
        trace: bool = False,
        stall_ns: int = DEFAULT_STALL_NS,
        flight_records: int = DEFAULT_FLIGHT_RECORDS,
    ) -> None:
        self.plan = plan
        #: A stage busy this long without finishing (no state change) is stalled: said live,
        #: kept in ``stall``, a finding. Per state probe: [stage, start, end, ongoing].
        self.stall_ns = stall_ns
        self.stalls: dict[int, Stall] = {}
        self._stall_rows: list[tuple[Stall, bool]] = []
        self.truth_dir = truth_dir
        self.topology = topology
        self.drop_frame_ns = drop_frame_ns
        self.sink = sink
        self.on_table = on_table
        self.domains = Domains(topology, on_table, method=method)
        self.timebase: HostMap | None = None
        #: Batches and device messages of domains not yet calibrated, in arrival order.
        self._waiting: dict[str, list[_Batch | Message]] = {}
        #: Records of a clock domain past its latest calibration burst, in arrival order: they
        #: are placed in time only once a later burst brackets them (interpolation, never
        #: extrapolation past a step or a change of rate), and frames wait for them.
        self._held: dict[str, list[_Batch]] = {}
        #: Every burst of the run is known already (``retime``): nothing waits for another.
        self.final_map = False
        #: What the monitor's own drain of the rings promises: no ring record still to come is
        #: older than this (virtual ns); None before the first drain.
        self.ring_watermark_ns: int | None = None
        #: Per probe, ns per event and how it was measured (set by the service at the end).
        self.cost_model: CostModel | None = None
        #: Probes whose raw records are kept for ``retime``: those of clock domains, and both
        #: ends of every channel whose ends are in different domains.
        self.crossing = crossing_channels(topology)
        #: With ``trace``, every probe's records are kept (for trace export).
        self.keep_raw = {
            p.id for p in topology.probes
            if trace or p.domain != HOST or p.target in self.crossing or p.kind == "trace"
        }  # fmt: skip
        #: The latest of the other records (host stages' states, host channels' ends), so an
        #: export of an ordinary run shows its last stretch; with ``trace`` all are kept anyway.
        self.flight = FlightRecorder(0 if trace else flight_records)
        self.agents: dict[int, _AgentState] = {}
        #: Function tracing: the traced stage of each trace probe, and their profiles.
        self.traces = {p.id: p.target for p in topology.probes if p.kind == "trace"}
        self._trace_ids = np.fromiter(self.traces, dtype=np.int64, count=len(self.traces))
        self.profiles = ProfileBuilder()
        #: Functions left out of tracing while running (NOTE messages): name -> why.
        self.trace_excluded: dict[str, str] = {}
        #: Each stage thread's time figures (NOTE messages at its end): stage -> field -> value.
        self.runner: dict[str, dict[str, int]] = {}
        self.channels: dict[str, ChannelStream] = {}
        #: One per state probe: a stage worked in by several threads or processes (a drop-in
        #: program's pool) has one per worker, and its duty is theirs on average.
        self.stages: dict[int, StageStream] = {}
        #: Per state probe (a worker): the resource it ran on, and ns spent in each state
        #: (index: the state; last: unknown), for the per-worker breakdown (``worker`` table).
        self.worker_of: dict[int, str] = {}
        self.worker_ns: dict[int, list[int]] = {}
        #: Value probes (samplers, counters, timers, per-iteration durations), by probe id.
        self.events: dict[int, EventStream] = {}
        tick_ns = {r.clock_domain: r.tick_period_ns for r in topology.resources}
        self.probe_kind: dict[int, tuple[str, str]] = {
            p.id: (p.kind, p.target) for p in topology.probes
        }
        self._probe_domain = {p.id: p.domain for p in topology.probes}
        links = {c.name for c in topology.channels if c.is_link}
        #: Link channels whose occupancy is estimated (virtual queues), by channel name.
        self.virtual = virtual_queues(topology, plan, on_table, truth_dir is not None)
        self._vq_key = {vq.key + i: (vq, side) for vq in self.virtual.values()
                        for i, side in enumerate(SIDES)}  # fmt: skip
        self._vq_probe = {pid: (vq, side, role) for vq in self.virtual.values()
                          for pid, (side, role) in vq.probes().items()}  # fmt: skip
        measured = {
            t.name for q in plan.queries for t in q.targets
            if not (q.metric == "occupancy" and t.name in self.virtual)
        }  # fmt: skip
        for p in topology.probes:
            if p.kind in ("tail", "head") and (p.target not in links or p.target in measured):
                self.channels.setdefault(p.target, ChannelStream(p.target))
            elif p.kind == "state":
                self.stages[p.id] = StageStream(p.target)
                self.worker_of[p.id] = _resource_of(topology, p.target)
            elif p.kind in EVENT_METRICS:
                durations = METRICS[EVENT_METRICS[p.kind]].time_valued
                scale = tick_ns.get(p.domain, 1.0) if durations else None
                self.events[p.id] = EventStream(EVENT_METRICS[p.kind], p.target, scale)
        self.reducers: list[TargetReducer] = [
            TargetReducer(q.id, q.metric, t.name, t.specs, q.frame_ns, t.name in self.crossing)
            for q in plan.queries
            for t in q.targets
            if not (q.metric == "occupancy" and t.name in self.virtual)
        ]
        self._by_target: dict[tuple[str, str], list[TargetReducer]] = {}
        for r in self.reducers:
            self._by_target.setdefault((r.metric, r.target), []).append(r)
        #: Events (kept or refused), per probe id.
        self.probe_events: dict[int, int] = {}
        self._frame_lengths = sorted({drop_frame_ns, *(q.frame_ns for q in plan.queries)})
        self.watermark_ns = 0
        self.recorded: dict[tuple[int, int], int] = {}
        self.dropped: dict[tuple[int, int], int] = {}
        self.next_drop_frame = 0
        self.events_seen = 0
        self.late = 0

    # -- input ---------------------------------------------------------------------------------

    def start(self, t0_ticks: int) -> None:
        self.timebase = HostMap(t0_ticks)
        self.domains.start(t0_ticks)

    def handle(self, msg: Message) -> None:
        if msg.type == MsgType.START:
            self.start(msg.watermark)
            return
        if msg.type == MsgType.HELLO:
            state = self.agents.setdefault(msg.agent, _AgentState(0))
            state.domain = str(msg.info.get("domain", HOST))
            state.data = bool(msg.info.get("data", False))
            return
        if msg.type == MsgType.NOTE:
            excluded = msg.info.get("trace_excluded", {})
            if isinstance(excluded, dict):
                self.trace_excluded.update({str(k): str(v) for k, v in excluded.items()})
            runner = msg.info.get("runner", {})
            if isinstance(runner, dict):
                for stage, stats in runner.items():
                    acc = self.runner.setdefault(str(stage), dict.fromkeys(RUNNER_FIELDS, 0))
                    for key in RUNNER_FIELDS:
                        acc[key] += int(stats.get(key, 0)) if isinstance(stats, dict) else 0
            return
        if msg.type == MsgType.CALIBRATION:
            domain = self.domains.calibrate(msg.agent, msg.records)
            for held in self._waiting.pop(domain, []):
                if isinstance(held, _Batch):
                    self._take(domain, held)
                else:
                    self.handle(held)
            for batch in self._held.pop(domain, []):
                self._take(domain, batch)  # what the new burst brackets; the rest waits again
            return
        if self.timebase is None:
            return
        state = self.agents.setdefault(msg.agent, _AgentState(0))
        if not self.domains.ready(state.domain):
            # A device's messages wait for its first calibration (its start burst, milliseconds).
            self._waiting.setdefault(state.domain, []).append(msg)
            return
        if msg.type in (MsgType.BATCH, MsgType.SUMMARY):
            state.data = True  # it sends what frames are made of: frames wait for it
        if msg.type == MsgType.BATCH and len(msg.records):
            self._take(state.domain, _Batch(msg.records))
        if msg.type == MsgType.SUMMARY:
            self._summaries(msg)
        if msg.type in (MsgType.BATCH, MsgType.END):
            wm = self.domains.scalar_to_ns(state.domain, msg.watermark)
            state.watermark_ns = max(state.watermark_ns, wm)
        if msg.type == MsgType.END:
            state.ended = True

    def probe_domain(self, probe: int) -> str:
        """The clock domain of ``probe``'s records."""
        return self._probe_domain.get(probe, HOST)

    def disconnect(self, agent: int) -> None:
        """The agent's link closed: it will send nothing more."""
        if agent in self.agents:
            self.agents[agent].ended = True

    def ingest(
        self, domain: str, batch: _Batch | Records, drops: Sequence[tuple[int, int, int]] = ()
    ) -> None:
        """Records of ``domain`` in raw ticks (each probe's together, in its write order), and
        refusals ``(probe, t_report_ns, count)`` noticed after them. A domain not calibrated yet
        keeps them until its first burst arrives."""
        if not isinstance(batch, _Batch):
            batch = _Batch(batch, tuple(drops))
        if self.timebase is None:
            return
        if not self.domains.ready(domain):
            # A device's records wait for its first calibration (its start burst, milliseconds).
            self._waiting.setdefault(domain, []).append(batch)
            return
        self._take(domain, batch)

    def _bracketed(self, domain: str, batch: _Batch) -> _Batch | None:
        """The part of ``batch`` its domain's bursts bracket; the rest is held for the next."""
        rec = batch.records
        if domain == HOST or not len(rec) or self.final_map:
            return batch
        bracket = self.domains.bracket_ticks(domain)
        past = rec["ticks"] > bracket if bracket is not None else np.ones(len(rec), dtype=bool)
        if not past.any():
            return batch
        # Refusals noticed after these records go with the latest of them.
        self._held.setdefault(domain, []).append(_Batch(rec[past], batch.drops))
        return None if past.all() else _Batch(rec[~past])

    def _take(self, domain: str, batch: _Batch, *, hold: bool = True) -> None:
        if hold:
            ready = self._bracketed(domain, batch)
            if ready is None:
                return
            batch = ready
        rec = batch.records
        drops = list(batch.drops)
        refused = rec["kind"] == Kind.REFUSED
        if refused.any():  # a device's latest refused values (after its records, as DROPPED)
            t, _ = self.domains.to_ns(domain, rec["ticks"][refused].astype(np.int64))
            late_seqs = zip(
                rec["probe"][refused].tolist(), rec["value"][refused].tolist(), t.tolist(),
                strict=True,
            )  # fmt: skip
            rec = rec[~refused]
        else:
            late_seqs = zip((), (), (), strict=True)
        held = rec["kind"] == Kind.DROPPED
        if held.any():  # a device's DROPPED rows that waited for its calibration
            t, _ = self.domains.to_ns(domain, rec["ticks"][held].astype(np.int64))
            drops += zip(
                rec["probe"][held].tolist(), t.tolist(), rec["value"][held].tolist(), strict=True
            )
            rec = rec[~held]
        self._charge(rec, drops)
        self.events_seen += len(rec) + len(drops)
        t, halfwidth = self.domains.to_ns(domain, rec["ticks"].astype(np.int64))
        keep = np.ones(len(rec), dtype=bool)
        self._keep_raw(rec)
        self._fly(rec)
        traced = np.isin(rec["probe"], self._trace_ids) if self.traces else None
        if traced is not None and traced.any():
            self._traces(rec[traced], t[traced])
            keep &= ~traced
        self._route(rec[keep], t[keep], halfwidth)
        # After this batch's records: a refusal's gap starts at the probe's last kept record.
        for pid, t_report, n in drops:
            key = (pid, max(t_report, 0) // self.drop_frame_ns)
            self.dropped[key] = self.dropped.get(key, 0) + n
            kind, target = self.probe_kind.get(pid, ("", ""))
            if kind in ("tail", "head"):
                self.channels[target].add_refusal(kind, t_report)
            elif kind == "state" and pid in self.stages:
                self.stages[pid].add_refusal(t_report)
        for pid, seq, t_seen in late_seqs:
            self.note_refused(pid, seq, t_seen)

    def declare(self, found: Topology) -> bool:
        """Stages, channels and probes that appeared while the run went on (a drop-in program's
        workers and queues): they are measured from now on by every query whose pattern matches
        them. True when the topology or the queries' targets changed."""
        topo = self.topology
        grown = topo.merged(found)
        if grown is topo:
            return False
        self.topology = grown
        new_stg = grown.stages[len(topo.stages) :]
        new_chn = grown.channels[len(topo.channels) :]
        new_prb = grown.probes[len(topo.probes) :]
        wm = self.watermark_ns
        for p in new_prb:
            self.probe_kind[p.id] = (p.kind, p.target)
            self._probe_domain[p.id] = p.domain
            if p.kind in ("tail", "head"):
                self.channels.setdefault(p.target, ChannelStream(p.target, wm))
            elif p.kind == "state":
                self.stages[p.id] = StageStream(p.target, wm)
                self.worker_of[p.id] = _resource_of(found, p.target) or _resource_of(
                    grown, p.target
                )
            elif p.kind in EVENT_METRICS:
                durations = METRICS[EVENT_METRICS[p.kind]].time_valued
                ticks = {r.clock_domain: r.tick_period_ns for r in self.topology.resources}
                scale = ticks.get(p.domain, 1.0) if durations else None
                self.events[p.id] = EventStream(EVENT_METRICS[p.kind], p.target, scale)
        valued = [(p.kind, p.target) for p in new_prb if p.kind in EVENT_METRICS]
        added = new_targets(self.plan, [s.name for s in new_stg], new_chn, valued)
        if added:
            by_id = {q.id: q for q in self.plan.queries}
            extra: dict[int, tuple[TargetPlan, ...]] = {}
            for qid, target in added:
                q = by_id[qid]
                r = TargetReducer(q.id, q.metric, target.name, target.specs, q.frame_ns)
                r.next_frame = wm // q.frame_ns
                self.reducers.append(r)
                self._by_target.setdefault((r.metric, r.target), []).append(r)
                extra[qid] = (*extra.get(qid, ()), target)
            self.plan = dataclasses.replace(
                self.plan,
                queries=tuple(
                    dataclasses.replace(q, targets=q.targets + extra.get(q.id, ()))
                    for q in self.plan.queries
                ),
            )
        return True

    def writer_gone(self, pid: int) -> None:
        """Probe ``pid``'s process ended and its ring is drained: a stage worker it recorded is
        gone, not idle, from its last record on."""
        stream = self.stages.get(pid)
        if stream is not None:
            stream.end()

    def note_refused(self, pid: int, seq: int, t_report: int) -> None:
        """The latest record probe ``pid`` refused before ``t_report`` carried ``seq``: for a
        channel end, its insertion or removal number, so no refused item goes uncounted."""
        kind, target = self.probe_kind.get(pid, ("", ""))
        if kind in ("tail", "head") and target in self.channels:
            self.channels[target].ends[kind].know(seq, t_report)

    def _charge(self, rec: Records, drops: Sequence[tuple[int, int, int]]) -> None:
        """Count each probe's events (kept or refused)."""
        if len(rec):
            ids, counts = np.unique(rec["probe"].astype(np.int64), return_counts=True)
            for pid, n in zip(ids.tolist(), counts.tolist(), strict=True):
                self.probe_events[pid] = self.probe_events.get(pid, 0) + n
        for pid, _, n in drops:
            self.probe_events[pid] = self.probe_events.get(pid, 0) + n

    def _traces(self, rec: Records, t: NDArray[np.int64]) -> None:
        """Function enter/exit records into each traced stage's profile (one tap per thread,
        its records in time order)."""
        probes = rec["probe"].astype(np.int64)
        for pid in np.unique(probes).tolist():
            sel = probes == pid
            self.profiles.add(
                self.traces[pid],
                t[sel],
                rec["kind"][sel].astype(np.int64),
                rec["value"][sel].astype(np.int64),
            )
            self._count_recorded(pid, t[sel])

    def _summaries(self, msg: Message) -> None:
        """A device's per-frame summaries of one of its virtual queues' sub-queues."""
        key, summaries = decode_summaries(msg.payload)
        found = self._vq_key.get(key)
        if found is not None:
            found[0].add_summaries(found[1], summaries)

    def _fly(self, rec: Records) -> None:
        """Into the flight recorder: the records neither kept raw nor traced."""
        if not self.flight.capacity or not len(rec):
            return
        kept = np.fromiter(self.keep_raw | set(self.traces), dtype=np.int64)
        self.flight.add(rec[~np.isin(rec["probe"], kept)] if len(kept) else rec)

    def _keep_raw(self, rec: Records) -> None:
        if self.on_table is None or not self.keep_raw or not len(rec):
            return
        mask = np.isin(rec["probe"], np.fromiter(self.keep_raw, dtype=np.int64))
        if mask.any():
            r = rec[mask]
            self.on_table(
                "record",
                {"probe_id": r["probe"].astype(np.int64), "kind": r["kind"].astype(np.int64),
                 "ticks": r["ticks"], "value": r["value"]},
            )  # fmt: skip

    def _route(self, rec: Records, t: NDArray[np.int64], halfwidth: float = 0.0) -> None:
        """Hand each probe's records to its stream (one slice per probe, no per-record loop)."""
        if not len(rec):
            return
        probes = rec["probe"].astype(np.int64)
        values = rec["value"].astype(np.int64)
        ids, starts = runs(probes)
        if len(set(ids.tolist())) != len(ids):
            # An agent sends each tap's records together; only a mixed batch needs sorting.
            order = np.argsort(probes, kind="stable")
            probes, values, t = probes[order], values[order], t[order]
            ids, starts = runs(probes)
        bounds = [*starts.tolist(), len(probes)]
        for i, pid in enumerate(ids.tolist()):
            pt, pv = t[bounds[i] : bounds[i + 1]], values[bounds[i] : bounds[i + 1]]
            kind, target = self.probe_kind.get(pid, ("", ""))
            found = self._vq_probe.get(pid)
            if found is not None:
                found[0].add_records(found[1], found[2], pt, pv)
            stream: ChannelStream | StageStream | EventStream | None = None
            if kind in ("tail", "head"):
                stream = self.channels.get(target)
            elif kind == "state":
                stream = self.stages.get(pid)
            else:
                stream = self.events.get(pid)
            if isinstance(stream, ChannelStream) and len(pv):
                top = int(np.argmax(pv))  # a late record's items still count (at the end at worst)
                stream.ends[kind].know(int(pv[top]), int(pt[top]))
            if stream is not None:
                # Too late to place in time (its span is already reduced): dropped, not recorded.
                late = pt < stream.last_t
                n_late = int(late.sum())
                if n_late:
                    self.late += n_late
                    key = (pid, max(int(pt[late].min()), 0) // self.drop_frame_ns)
                    self.dropped[key] = self.dropped.get(key, 0) + n_late
                    pt, pv = pt[~late], pv[~late]
            self._count_recorded(pid, pt)
            if isinstance(stream, ChannelStream):
                stream.add(kind, pt, pv)
                stream.note_uncertainty(kind, halfwidth)
            elif stream is not None:
                stream.add(pt, pv)

    def _count_recorded(self, pid: int, t: np.ndarray) -> None:
        frames, starts = runs(frame_index(np.maximum(t, 0), self.drop_frame_ns))
        counts = np.diff(np.append(starts, len(t)))
        for f, c in zip(frames.tolist(), counts.tolist(), strict=True):
            self.recorded[(pid, f)] = self.recorded.get((pid, f), 0) + c

    # -- reduction -----------------------------------------------------------------------------

    def live_watermark(self) -> int:
        """What every source of records still to come has passed: the monitor's last drain of
        the rings, and each live data agent's watermark. Nothing passes records that wait for
        their domain's first calibration (their times are not known yet)."""
        if any(self._waiting.values()):
            return self.watermark_ns
        data = [a for a in self.agents.values() if a.data]
        live = [a.watermark_ns for a in data if not a.ended]
        if self.ring_watermark_ns is not None:
            live.append(self.ring_watermark_ns)
        if live:
            return min([*live, *self._brackets()])
        done = [a.watermark_ns for a in data if a.watermark_ns < WATERMARK_END]
        return max(done) if done else self.watermark_ns

    def provisional(self) -> list[FrameResult]:
        """Frames that wait for a clock's next calibration, as they would close if the latest
        fit held past it (extrapolated, with the bounds that come with it): for a live view
        only, marked provisional; nothing here is written, and the final frames follow once a
        burst brackets them. Empty when nothing waits."""
        if not any(self._held.values()) or self.timebase is None:
            return []
        data = [a for a in self.agents.values() if a.data]
        live = [a.watermark_ns for a in data if not a.ended]
        if self.ring_watermark_ns is not None:
            live.append(self.ring_watermark_ns)
        until = min(live) if live else self.watermark_ns
        if until <= self.watermark_ns:
            return []
        # A copy that writes nothing: the engine's own state and outputs stay as they are.
        memo: dict[int, object] = {id(self.sink): _discard, id(self.on_table): None}
        twin = copy.deepcopy(self, memo)
        twin.truth_dir = None
        for domain, batches in twin._held.items():
            for batch in batches:
                twin._take(domain, batch, hold=False)
        twin._held.clear()
        return [dataclasses.replace(r, provisional=True) for r in twin.advance(until=until)]

    def _brackets(self) -> list[int]:
        """For each clock domain that holds records past its latest burst: where that burst
        ends, in virtual ns (frames after it wait for the next burst)."""
        out = []
        for domain, held in self._held.items():
            if not held:
                continue
            bracket = self.domains.bracket_ticks(domain)
            if bracket is None:  # not bracketed at all yet: nothing passes
                out.append(self.watermark_ns)
            else:
                out.append(max(self.domains.scalar_to_ns(domain, bracket), 0))
        return out

    def next_due(self) -> int:
        """The next virtual time at which a frame closes (of any query, or of the drop counts):
        reducing before it closes nothing."""
        wm = self.watermark_ns
        lengths = self._frame_lengths
        return min((wm // f + 1) * f for f in lengths)

    def advance(self, until: int | None = None, *, end_ns: int | None = None) -> list[FrameResult]:
        """Reduce everything before the watermark (or ``until``) and emit frames it completed."""
        if self.timebase is None:
            return []
        wm = self.live_watermark() if until is None else until
        if wm <= self.watermark_ns and end_ns is None:
            return []
        wm = max(wm, self.watermark_ns)
        self.watermark_ns = wm
        for name, stream in self.channels.items():
            before = stream.last_t
            out = stream.advance(wm)
            for metric in ("occupancy", "latency", "throughput", "count"):
                for r in self._by_target.get((metric, name), ()):
                    r.add_quality(out.violations, out.uncertainty_ns, before, wm)
            for r in self._by_target.get(("occupancy", name), ()):
                r.add_segments(out.occupancy)
            for r in self._by_target.get(("latency", name), ()):
                r.add_events(out.latency)
            for r in self._by_target.get(("interinsertion", name), ()):
                r.add_events(out.interinsertion)
            for r in self._by_target.get(("interdeparture", name), ()):
                r.add_events(out.interdeparture)
            for r in self._by_target.get(("count", name), ()):
                r.add_times(out.insertions)
            for r in self._by_target.get(("throughput", name), ()):
                r.add_times(out.removals)
        for pid, sstream in self.stages.items():
            seg = sstream.advance(wm)
            for r in self._by_target.get(("state", sstream.name), ()):
                r.add_segments(seg)
            if len(seg.start):
                spent = self.worker_ns.setdefault(pid, [0] * (len(STATE_LABELS) + 1))
                lengths = seg.end - seg.start
                for level in range(len(STATE_LABELS)):
                    spent[level] += int(lengths[seg.level == level].sum())
                spent[-1] += int(lengths[(seg.level < 0) | (seg.level >= len(STATE_LABELS))].sum())
            self._watch_stall(pid, sstream, wm)
        for es in self.events.values():
            ev = es.advance(wm)
            for r in self._by_target.get((es.metric, es.target), ()):
                r.add_events(ev)
        results: list[FrameResult] = []
        for r in self.reducers:
            results.extend(r.close_until(wm, end_ns))
        for vq in self.virtual.values():
            if end_ns is None:
                results.extend(vq.advance(wm, self.domains))
            else:
                results.extend(vq.finish(end_ns, self.domains, self.truth_dir))
        drops = self._close_drops(wm, end_ns)
        if results or drops:
            self.sink(results, drops)
        return results

    def _watch_stall(self, pid: int, sstream: StageStream, wm: int) -> None:
        """Open, extend or close ``pid``'s stall: busy since its last record for ``stall_ns``."""
        since = sstream.last_record_t
        busy = sstream.state == State.BUSY and wm - since >= self.stall_ns
        open_ = self.stalls.get(pid)
        if open_ is not None and (not busy or open_.start_ns != since):
            del self.stalls[pid]
            # A worker whose process was stopped while stuck never went on: still stalled.
            self._stall_rows.append((open_, sstream.gone))
        if busy:
            self.stalls[pid] = Stall(sstream.name, since, wm)

    def current_stalls(self) -> list[Stall]:
        """Stages stalled now, by stage."""
        return sorted(self.stalls.values(), key=lambda x: (x.stage, x.start_ns))

    def _close_drops(self, wm: int, end_ns: int | None) -> list[DropCount]:
        last = wm // self.drop_frame_ns - 1 if end_ns is None else None
        keys = sorted(set(self.recorded) | set(self.dropped), key=lambda k: (k[1], k[0]))
        out = []
        for key in keys:
            if last is not None and key[1] > last:
                continue
            out.append(
                DropCount(key[0], key[1], self.dropped.pop(key, 0), self.recorded.pop(key, 0))
            )
        return out

    def finish(self, end_ns: int) -> list[FrameResult]:
        """Reduce everything up to the end of the run and emit every frame, the last one partial.

        Records of a clock domain that was never calibrated cannot be placed in time: they are
        counted as dropped (in the run's last frame), never silently lost.
        """
        last = max(end_ns - 1, 0) // self.drop_frame_ns
        for waiting in self._waiting.values():
            for held in waiting:
                kinds = held.records["kind"]
                probes = held.records["probe"][(kinds != Kind.DROPPED) & (kinds != Kind.REFUSED)]
                for pid in np.unique(probes).tolist():
                    n = int((probes == pid).sum())
                    key = (int(pid), last)
                    self.dropped[key] = self.dropped.get(key, 0) + n
                    self.late += n
        self._waiting.clear()
        # No burst came after these (a device that stopped answering): extrapolated, as a last
        # resort, with the bounds that come with it.
        for domain, held_batches in self._held.items():
            for batch in held_batches:
                self._take(domain, batch, hold=False)
        self._held.clear()
        for name, stream in self.channels.items():
            # Items refused (or late) after each end's last kept record: counted all the same.
            for end, metric in (("tail", "count"), ("head", "throughput")):
                extra = stream.unrecorded(end, end_ns)
                if len(extra.t):
                    for r in self._by_target.get((metric, name), ()):
                        r.add_times(extra)
        out = self.advance(until=end_ns, end_ns=end_ns)
        if self.on_table is not None and self.traces:
            self.profiles.finish(end_ns)
            prof = self.profiles.profiles()
            if prof:
                self.on_table(
                    "profile",
                    {"stage": [p.stage for p in prof], "function_id": [p.function for p in prof],
                     "calls": [p.calls for p in prof], "total_ns": [p.total_ns for p in prof],
                     "self_ns": [p.self_ns for p in prof], "max_ns": [p.max_ns for p in prof]},
                )  # fmt: skip
        if self.on_table is not None and self.truth_dir is not None:
            self._clock_truth(self.truth_dir)
        if self.on_table is not None and self.flight.seen:
            kept = self.flight.records()
            if len(kept):
                self.on_table(
                    "record",
                    {"probe_id": kept["probe"].astype(np.int64),
                     "kind": kept["kind"].astype(np.int64), "ticks": kept["ticks"],
                     "value": kept["value"]},
                )  # fmt: skip
            self.on_table(
                "flight",
                {"capacity": [self.flight.capacity], "kept": [len(kept)],
                 "overwritten": [self.flight.overwritten]},
            )  # fmt: skip
        if self.on_table is not None and self.worker_ns:
            pids = sorted(self.worker_ns)
            spent = [self.worker_ns[p] for p in pids]
            workers: dict[str, list[Any]] = {
                "stage": [self.stages[p].name for p in pids], "probe_id": pids,
                "resource": [self.worker_of.get(p, "") for p in pids],
            }  # fmt: skip
            for i, label in enumerate(STATE_LABELS):
                workers[f"{label}_ns"] = [s[i] for s in spent]
            workers["unknown_ns"] = [s[-1] for s in spent]
            self.on_table("worker", workers)
        rows = self._stall_rows + [(x, True) for x in self.stalls.values()]
        if self.on_table is not None and rows:
            self.on_table(
                "stall",
                {"stage": [x.stage for x, _ in rows], "start_ns": [x.start_ns for x, _ in rows],
                 "end_ns": [x.end_ns for x, _ in rows], "ongoing": [o for _, o in rows]},
            )  # fmt: skip
        if self.on_table is not None and self.runner:
            stages = sorted(self.runner)
            cols: dict[str, list[object]] = {"stage": list(stages)}
            for field_ in RUNNER_FIELDS:
                cols[field_] = [self.runner[name][field_] for name in stages]
            self.on_table("runner", cols)
        if self.on_table is not None and self.trace_excluded:
            names = sorted(self.trace_excluded)
            self.on_table(
                "trace_exclusion",
                {"name": names, "reason": [self.trace_excluded[n] for n in names]},
            )
        if self.on_table is not None and self.probe_events:
            pids = sorted(self.probe_events)
            events = [self.probe_events[p] for p in pids]
            model = self.cost_model
            per = [model(p) if model is not None else (0.0, "") for p in pids]
            self.on_table(
                "overhead",
                {"probe_id": pids, "events": events,
                 "est_probe_ns": [e * c for e, (c, _) in zip(events, per, strict=True)],
                 "ns_per_event": [c for c, _ in per], "measured": [m for _, m in per]},
            )  # fmt: skip
        return out

    def _clock_truth(self, truth_dir: str) -> None:
        """Validation runs: the emulated clocks' specs and epochs, read only now, after every
        estimate is made, into ``clock_truth``."""
        path = Path(truth_dir) / CLOCK_TRUTH
        if self.on_table is None or not path.exists():
            return
        clocks = json.loads(path.read_text(encoding="utf-8"))
        domain = {r.name: r.clock_domain for r in self.topology.resources}
        names = sorted(n for n in clocks if n in domain)
        if names:
            self.on_table(
                "clock_truth",
                {"domain": [domain[n] for n in names],
                 "spec": [str(clocks[n]["spec"]) for n in names],
                 "epoch_host_ns": [int(clocks[n]["epoch_host_ns"]) for n in names]},
            )  # fmt: skip


def _discard(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
    """A sink that keeps nothing (provisional frames go to the live view only)."""


def crossing_channels(topology: Topology) -> frozenset[str]:
    """Channels whose two ends are in different clock domains (their figures carry uncertainty)."""
    domain = {r.name: r.clock_domain for r in topology.resources}
    stage = {s.name: domain.get(s.resource, HOST) for s in topology.stages}
    return frozenset(
        c.name for c in topology.channels if stage.get(c.src, HOST) != stage.get(c.dst, HOST)
    )


def _resource_of(topology: Topology, stage: str) -> str:
    """The resource ``topology`` places ``stage`` on ("" if it does not)."""
    return next((s.resource for s in topology.stages if s.name == stage), "")
