"""The monitor's reduction engine: records in, frame results and drop counts out.

In: batches of records in raw ticks of their clock domain, from the rings the monitor drains
(``ingest``, with the drain's watermark) and from device agents' messages (``handle``), and the
refusals counted meanwhile. Out: ``FrameResult``s written to a store as soon as the watermark has
passed a frame's end, and ``DropCount``s. Memory stays bounded: records wait only until the
watermark passes them. Its parts: ``clockgate`` (what waits for a clock's bursts), ``routing``
(each probe's stream), ``reducers`` (per query and target), ``virtual`` (virtual queues),
``ledger`` (what was kept and lost), ``stalls`` and, at the end, ``endtables``.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from streamscope.aggregate.points import DropCount, FrameResult, ScalarPoint
from streamscope.aggregate.shipped import FRAMES_MAGIC, ShippedFrame, decode_frames
from streamscope.aggregate.subqueue import decode_summaries
from streamscope.core.options import (
    DEFAULT_FLIGHT_RECORDS,
    DEFAULT_STALL_NS,
    DEFAULT_VQ_TOLERANCE,
)
from streamscope.core.records import Kind, Records
from streamscope.core.tablerows import TableSink
from streamscope.core.topology import HOST, Known, Topology, path_ends
from streamscope.monitor import endtables
from streamscope.monitor.agents import Agents
from streamscope.monitor.clockgate import Batch, ClockGate
from streamscope.monitor.endtables import (
    CORE_FIELDS,
    HOST_FIELDS,
    LINK_FIELDS,
    MACHINE_FIELDS,
    RUNNER_FIELDS,
    CostModel,
)
from streamscope.monitor.keeping import Keeper
from streamscope.monitor.stalls import Stall, StallWatch
from streamscope.monitor.vqlinks import SIDES, virtual_queues
from streamscope.query.ast import Path
from streamscope.query.follow import new_targets
from streamscope.query.plan import Plan
from streamscope.reduction.ledger import Ledger
from streamscope.reduction.littlepath import LittlePath
from streamscope.reduction.reducers import ReducerIndex, TargetReducer
from streamscope.reduction.routing import Routes
from streamscope.reduction.streams import EVENT_METRICS
from streamscope.timebase.clockmap import HostMap
from streamscope.timebase.domains import Domains
from streamscope.transport.wire import WATERMARK_END, Message, MsgType

__all__ = ["DEFAULT_STALL_NS", "CostModel", "Engine", "FrameSink", "Stall"]

FrameSink = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]


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
        vq_tolerance: float = DEFAULT_VQ_TOLERANCE,
    ) -> None:
        self.plan = plan
        self.topology = topology
        self._known = Known(topology)
        self.truth_dir = truth_dir
        self.vq_tolerance = vq_tolerance
        self.drop_frame_ns = drop_frame_ns
        self.sink = sink
        self.on_table = on_table
        self.domains = Domains(topology, on_table, method=method)
        self.gate = ClockGate(self.domains)
        self.timebase: HostMap | None = None
        #: What the monitor's own drain of the rings promises: no ring record still to come is
        #: older than this (virtual ns); None before the first drain.
        self.ring_watermark_ns: int | None = None
        #: Per probe, ns per event and how it was measured (set by the service at the end).
        self.cost_model: CostModel | None = None
        self.agents = Agents()
        self.ledger = Ledger(drop_frame_ns)
        self.stalls = StallWatch(stall_ns)
        self.keeper = Keeper(topology, on_table, trace, flight_records)
        self.crossing = self.keeper.crossing
        self._notes()
        self._build_streams(plan, topology, on_table)
        self._frame_lengths = sorted({drop_frame_ns, *(q.frame_ns for q in plan.queries)})
        self.watermark_ns = 0
        #: Channels whose queues were dropped, by the virtual time they ended: let go once
        #: reduced that far; the channels and stages let go so far: (kind, name, end).
        self._ending: dict[str, int] = {}
        self.ended: list[tuple[str, str, int]] = []
        #: Workers whose threads ended (their rings closed), by the virtual time they did.
        self._gone_workers: dict[int, int] = {}

    def _notes(self) -> None:
        """What agents say besides records (NOTE messages)."""
        #: Functions left out of tracing while running: name -> why.
        self.trace_excluded: dict[str, str] = {}
        #: Each stage thread's time figures (at its end): stage -> field -> value.
        self.runner: dict[str, dict[str, int]] = {}
        #: Each stage's service-time samples (ns; ``pipeline.run.worker.LoopStats.service``).
        self.service: dict[str, list[int]] = {}
        #: The whole machine's busy CPU time over the run, and the run's wall time.
        self.machine: dict[str, dict[str, int]] = {}
        #: Each network link's batches sent and late (both its sides' notes): name -> field.
        self.links: dict[str, dict[str, int]] = {}
        #: Each cluster host's traffic to the monitor (its agent's notes and the runner's).
        self.hosts: dict[str, dict[str, int]] = {}
        #: An RTL device's cores, by ``resource/core``.
        self.cores: dict[str, dict[str, int]] = {}

    def _build_streams(self, plan: Plan, topology: Topology, on_table: TableSink | None) -> None:
        """Each probe's stream, each measured (query, target)'s reducer, the virtual queues."""
        self._probe_domain = topology.probe_domains()
        #: Link channels whose occupancy is estimated (virtual queues), by channel name.
        self.virtual = virtual_queues(
            topology, plan, on_table, self.truth_dir is not None, self.vq_tolerance
        )
        self._vq_key = {vq.key + i: (vq, side) for vq in self.virtual.values()
                        for i, side in enumerate(SIDES)}  # fmt: skip
        self._vq_probe = {pid: (vq, side, role) for vq in self.virtual.values()
                          for pid, (side, role) in vq.probes().items()}  # fmt: skip
        pairs = plan.monitor_measured
        measured = {t.name for _, t in pairs}
        #: The pairs hosts reduce themselves: (query, target) -> its reducer, which only
        #: fills the frames a host never sent (``finish``); and their frames as they came.
        self.host_pairs = {
            (q.id, t.name): TargetReducer(q.id, q.metric, t.name, t.specs, q.frame_ns)
            for host_pairs in plan.host_reduced.values()
            for q, t in host_pairs
        }
        self._host_frames: list[FrameResult] = []
        elsewhere = {target for _, target in self.host_pairs} - measured
        links = topology.link_names
        self.routes = Routes(topology.tick_periods(), on_table, self.drop_frame_ns)
        summarized = plan.summarized_states
        for p in topology.probes:
            count = p.target in measured or (p.target not in links and p.target not in elsewhere)
            frame = summarized.get(p.target) if p.kind == "state" else None
            self.routes.add(
                p, resource=topology.resource_of(p.target), count=count, summarized_ns=frame
            )
        self.crossing = self.crossing | topology.crossing_targets(t.name for _, t in pairs)
        for q, t in pairs:
            if isinstance(q.query.target, Path) and not t.littles:
                src, dst = path_ends(t.name)
                route = topology.route(src, dst)
                self.routes.add_path(
                    t.name, [c.name for c in route if c.src == src],
                    [c.name for c in route if c.dst == dst],
                )  # fmt: skip
        #: Paths whose items are not followed: their means from Little's law.
        self.littles = [
            LittlePath(q.id, t.name, t.specs, q.frame_ns, lambda: self.topology)
            for q, t in pairs if t.littles
        ]  # fmt: skip
        self.reducers = ReducerIndex(
            [*(TargetReducer(q.id, q.metric, t.name, t.specs, q.frame_ns, t.name in self.crossing)
               for q, t in pairs if not t.littles), *self.littles]
        )  # fmt: skip
        for lp in self.littles:
            lp.attach(self.reducers)
        # A channel whose first items were put before its consumer was known begins then.
        self.routes.on_rewind = self.reducers.rewind

    # -- what the rest of the monitor reads --------------------------------------------------

    @property
    def events_seen(self) -> int:
        return self.ledger.events_seen

    @property
    def late(self) -> int:
        return self.ledger.late

    @property
    def final_map(self) -> bool:
        """Every burst of the run is known already (``retime``): nothing waits for another."""
        return self.gate.final

    @final_map.setter
    def final_map(self, value: bool) -> None:
        self.gate.final = value

    def probe_domain(self, probe: int) -> str:
        """The clock domain of ``probe``'s records."""
        return self._probe_domain.get(probe, HOST)

    def current_stalls(self) -> list[Stall]:
        """Stages stalled now, by stage."""
        return self.stalls.current()

    # -- input ---------------------------------------------------------------------------------

    def start(self, t0_ticks: int) -> None:
        self.timebase = HostMap(t0_ticks)
        self.domains.start(t0_ticks)

    def handle(self, msg: Message) -> None:
        if msg.type == MsgType.START:
            self.start(msg.watermark)
        elif msg.type == MsgType.HELLO:
            self.agents.hello(msg.agent, msg.info)
        elif msg.type == MsgType.NOTE:
            self._note(msg.info)
        elif msg.type == MsgType.CALIBRATION:
            self._calibrate(msg)
        elif self.timebase is not None:
            self._data(msg)

    def _note(self, info: dict[str, Any]) -> None:
        """What tracing left out, each stage thread's figures at its end, and the agents that
        will send data (frames wait for them before they say hello)."""
        for agent in info.get("data_agents", ()):
            self.agents.of(int(agent)).data = True
        excluded = info.get("trace_excluded", {})
        if isinstance(excluded, dict):
            self.trace_excluded.update({str(k): str(v) for k, v in excluded.items()})
        events = info.get("probe_events", {})
        for pid, n in events.items() if isinstance(events, dict) else ():
            # What hosts reduced themselves: events all the same (the overhead table's).
            self.ledger.probe_events[int(pid)] = self.ledger.probe_events.get(int(pid), 0) + int(n)
        for name, fields, into in (("runner", RUNNER_FIELDS, self.runner),
                                    ("links", LINK_FIELDS, self.links),
                                    ("hosts", HOST_FIELDS, self.hosts),
                                    ("cores", CORE_FIELDS, self.cores),
                                    ("machines", MACHINE_FIELDS, self.machine)):  # fmt: skip
            got = info.get(name, {})
            for key, stats in got.items() if isinstance(got, dict) else ():
                acc = into.setdefault(str(key), dict.fromkeys(fields, 0))
                for f in fields:
                    acc[f] += int(stats.get(f, 0)) if isinstance(stats, dict) else 0
        service = info.get("service", {})
        for stage, times in service.items() if isinstance(service, dict) else ():
            if isinstance(times, list):
                self.service.setdefault(str(stage), []).extend(int(t) for t in times)

    def _calibrate(self, msg: Message) -> None:
        """A burst: refit its domain, then place what waited for it."""
        domain = self.domains.calibrate(msg.agent, msg.records)
        waited, held = self.gate.calibrated(domain)
        for item in waited:
            if isinstance(item, Batch):
                self._take(domain, item)
            else:
                self.handle(item)
        for batch in held:
            self._take(domain, batch)  # what the new burst brackets; the rest waits again

    def _data(self, msg: Message) -> None:
        """An agent's records, summaries, watermark or end."""
        state = self.agents.of(msg.agent)
        if not self.gate.ready(state.domain):
            # A device's messages wait for its first calibration (its start burst, milliseconds).
            self.gate.wait(state.domain, msg)
            return
        if msg.type in (MsgType.BATCH, MsgType.SUMMARY):
            state.data = True  # it sends what frames are made of: frames wait for it
        if msg.type == MsgType.BATCH and len(msg.records):
            self._take(state.domain, Batch(msg.records))
        to_ns = functools.partial(self.domains.scalar_to_ns, state.domain)
        if msg.type == MsgType.SUMMARY and msg.payload[:4] == FRAMES_MAGIC:
            self._take_host_frames(state.domain, decode_frames(msg.payload))
        elif msg.type == MsgType.SUMMARY and not self.routes.take_state_frames(msg.payload, to_ns):
            key, summaries = decode_summaries(msg.payload)
            found = self._vq_key.get(key)
            if found is not None:
                found[0].add_summaries(found[1], summaries)
        if msg.type in (MsgType.BATCH, MsgType.END):
            # (after END no record follows: its watermark is taken as it is)
            shown = self.domains.scalar_to_ns(state.domain, msg.watermark)
            state.shown_ns = max(state.shown_ns, shown)
            if msg.type == MsgType.END:
                wm: int | None = shown
            else:
                wm = self._mark_ns(state.domain, msg.watermark)
            if wm is not None:
                state.watermark_ns = max(state.watermark_ns, wm)
        if msg.type == MsgType.END:
            state.ended = True

    def _mark_ns(self, domain: str, ticks: int) -> int | None:
        """An agent's watermark in virtual ns: the earliest its tick may be placed (None: not
        known yet). Past the domain's bracket (``Domains.bracket_ticks``) its map may still
        change, and the records there wait for the next burst: the watermark counts from the
        bracket instead. And a record just after it, placed by a refined fit, may land up to
        both bounds' half-widths before where this fit puts it: counting from the estimate
        would make that record late."""
        if ticks >= WATERMARK_END or domain == HOST:
            return self.domains.scalar_to_ns(domain, ticks)
        bracket = self.domains.bracket_ticks(domain)
        if bracket is None:
            return None
        at = min(ticks, bracket)
        wm = self.domains.scalar_to_ns(domain, at)
        _, half = self.domains.to_ns(domain, np.array([at], dtype=np.int64))
        return wm - math.ceil(2.0 * half) if math.isfinite(half) else None

    def _take_host_frames(self, domain: str, frames: list[ShippedFrame]) -> None:
        """Frames a host closed on the run's grid as it placed it on its clock: each says how
        far its edges may lie from their virtual times by this monitor's fit of that clock
        (the fit's bounds and the distance between the fit and the host's grid), and that no
        causality was broken (one clock's records only)."""
        for f in frames:
            r = f.result
            reducer = self.host_pairs.get((r.query_id, r.target))
            if reducer is None:
                continue
            unc = self._grid_error(domain, (f.lo_ticks, f.hi_ticks), (r.t_start_ns, r.t_end_ns))
            unc += f.slack_ns  # records an earlier grid of the host's placed inside the edges
            violations = 0
            st = f.stamped
            if st is not None:
                # A link's latency: its items' insertions were placed by the host's grid of
                # the producer's clock; how far that grid lies from this monitor's fit of it,
                # and the fit's bounds, add to the removals' (and any negative latency's size).
                unc += self._grid_error(st.domain, (st.lo_ticks, st.hi_ticks),
                                        (st.lo_ns, st.hi_ns)) + st.slack_ns  # fmt: skip
                violations = st.violations
            quality = (
                ScalarPoint("violations", float(violations)),
                ScalarPoint("uncertainty_ns", unc),
            )
            self._host_frames.append(dataclasses.replace(r, points=r.points + quality))
            reducer.next_frame = max(reducer.next_frame, r.frame + 1)

    def _grid_error(
        self, domain: str, ticks: tuple[float, float], placed_ns: tuple[float, float]
    ) -> float:
        """How far a host's grid placed ``ticks`` of ``domain``'s clock (at ``placed_ns``) may
        lie from their virtual times: the distance to this monitor's fit, and its bounds
        (infinite for a clock never calibrated)."""
        if not self.domains.ready(domain):
            return float("inf")
        t, hw = self.domains.to_ns_each(domain, np.array(ticks, dtype=np.int64))
        off = max(abs(float(t[0]) - placed_ns[0]), abs(float(t[1]) - placed_ns[1]))
        return float(off + hw.max())

    def disconnect(self, agent: int) -> None:
        """The agent's link closed: it will send nothing more."""
        self.agents.disconnect(agent)

    def ingest(
        self, domain: str, batch: Batch | Records, drops: Sequence[tuple[int, int, int]] = ()
    ) -> None:
        """Records of ``domain`` in raw ticks (each probe's together, in its write order), and
        refusals ``(probe, t_report_ns, count)`` noticed after them. A domain not calibrated yet
        keeps them until its first burst arrives."""
        if not isinstance(batch, Batch):
            batch = Batch(batch, tuple(drops))
        if self.timebase is None:
            return
        if not self.gate.ready(domain):
            # A device's records wait for its first calibration (its start burst, milliseconds).
            self.gate.wait(domain, batch)
            return
        self._take(domain, batch)

    def _take(self, domain: str, batch: Batch, *, hold: bool = True) -> None:
        """Place ``batch`` in time (what its domain's bursts bracket, unless ``hold`` is off)
        and route it."""
        ready = self.gate.bracketed(domain, batch) if hold else batch
        if ready is None:
            return
        rec, drops, late_seqs = self.gate.device_rows(domain, ready)
        self.ledger.charge(rec["probe"].astype(np.int64), drops)
        t, halfwidth = self.domains.to_ns(domain, rec["ticks"].astype(np.int64))
        keep = self.keeper.keep(rec, t, self.ledger)
        for pid, pt, pv in self.routes.route(rec[keep], t[keep], halfwidth, self.ledger):
            found = self._vq_probe.get(pid)
            if found is not None:
                found[0].add_records(found[1], found[2], pt, pv)
        # After this batch's records: a refusal's gap starts at the probe's last kept record.
        for pid, t_report, n in drops:
            self.ledger.drop(pid, t_report, n)
            tap = self.routes.taps.get(pid)
            if tap is not None:
                tap.refuse(t_report)
        for pid, seq, t_seen in late_seqs:
            self.note_refused(pid, seq, t_seen)

    def declare(self, *found: Topology) -> bool:
        """Stages, channels and probes that appeared while the run went on (a drop-in program's
        workers and queues), declared in ``found`` (those of one drain together): they are
        measured from now on by every query whose pattern matches them. True when the topology
        or the queries' targets changed."""
        topo = self.topology
        grown = self._known.grow(topo, *found)
        if grown is topo:
            return False
        self.topology = grown
        self.routes.tick_periods = grown.tick_periods()
        new_prb = grown.probes[len(topo.probes) :]
        wm = self.watermark_ns
        # Where a worker runs: its own declaration names its stage's resource (the whole
        # topology is looked through only when it does not).
        declared_in = {p.id: f for f in found for p in f.probes if p.kind == "state"}
        for p in new_prb:
            self._probe_domain[p.id] = p.domain
            where = ""
            if p.kind == "state":
                where = declared_in[p.id].resource_of(p.target) or grown.resource_of(p.target)
            self.routes.add(p, start_ns=wm, resource=where)
        valued = [(p.kind, p.target) for p in new_prb if p.kind in EVENT_METRICS]
        added = new_targets(
            self.plan,
            [s.name for s in grown.stages[len(topo.stages) :]],
            grown.channels[len(topo.channels) :],
            valued,
            fresh=True,
        )
        if added:
            self.plan = self.reducers.grow(self.plan, added, wm)
        for lp in self.littles:
            lp.attach(self.reducers)
        return True

    def rings_closed(self, pids: Sequence[int], t_ns: int) -> None:
        """The rings of probes ``pids`` were closed by their writers (a program dropped their
        queue) and drained, by virtual time ``t_ns``: a channel whose ends are all closed ends
        there, and goes once it is reduced that far."""
        for pid in pids:
            worker = self.routes.stages.get(pid)
            if worker is not None:
                # A thread that ended: its worker is gone after its last record, and goes
                # itself once reduced that far.
                worker.end()
                self._gone_workers[pid] = max(t_ns, self.watermark_ns)
                continue
            name = self.routes.close_probe(pid)
            if name is not None:
                self._ending[name] = max(t_ns, self.watermark_ns)

    def _end_workers(self, wm: int) -> None:
        """The workers gone by ``wm``: let go; a stage all of whose workers went ends."""
        done = [pid for pid, t in self._gone_workers.items() if t <= wm]
        for pid in done:
            t_end = self._gone_workers.pop(pid)
            stage = self.routes.drop_worker(pid)
            if stage is not None:
                self.reducers.end(stage, t_end)
                self.ended.append(("stage", stage, t_end))

    def _end_channels(self, wm: int) -> None:
        """The channels that ended by ``wm``: their last frames closed, then let go."""
        done = [(n, t) for n, t in self._ending.items() if t <= wm]
        for name, t_end in done:
            del self._ending[name]
            self.routes.end_channel(name, t_end, self.reducers)
            self.reducers.end(name, t_end)
            self.ended.append(("channel", name, t_end))

    def writer_gone(self, pid: int) -> None:
        """Probe ``pid``'s process ended and its ring is drained: a stage worker it recorded is
        gone, not idle, from its last record on."""
        stream = self.routes.stages.get(pid)
        if stream is not None:
            stream.end()

    def note_refused(self, pid: int, seq: int, t_report: int) -> None:
        """The latest record probe ``pid`` refused before ``t_report`` carried ``seq``: for a
        channel end, its insertion or removal number, so no refused item goes uncounted."""
        tap = self.routes.taps.get(pid)
        if tap is not None:
            tap.note_refused(seq, t_report)

    # -- reduction -----------------------------------------------------------------------------

    def live_watermark(self) -> int:
        """What every source of records still to come has passed: the monitor's last drain of
        the rings, and each live data agent's watermark. Nothing passes records that wait for
        their domain's first calibration (their times are not known yet)."""
        if self.gate.waits():
            return self.watermark_ns
        live = self.agents.live_marks(self.ring_watermark_ns)
        if live:
            return min([*live, *self.gate.brackets(self.watermark_ns)])
        done = self.agents.done_mark()
        return self.watermark_ns if done is None else done

    def provisional(self) -> list[FrameResult]:
        """Frames that wait for a clock's next calibration, as they would close if the latest
        fit held past it (extrapolated, with the bounds that come with it): for a live view
        only, marked provisional; nothing here is written, and the final frames follow once a
        burst brackets them. Empty when nothing waits."""
        if not self.gate.holds() or self.timebase is None:
            return []
        live = self.agents.live_marks(self.ring_watermark_ns, shown=True)
        until = min(live) if live else self.watermark_ns
        if until <= self.watermark_ns:
            return []
        # A copy that writes nothing: the engine's own state and outputs stay as they are.
        memo: dict[int, object] = {id(self.sink): _discard, id(self.on_table): None}
        twin = copy.deepcopy(self, memo)
        twin.truth_dir = None
        for domain, batch in twin.gate.release():
            twin._take(domain, batch, hold=False)
        return [dataclasses.replace(r, provisional=True) for r in twin.advance(until=until)]

    def next_due(self) -> int:
        """The next virtual time at which a frame closes (of any query, or of the drop counts):
        reducing before it closes nothing."""
        wm = self.watermark_ns
        return min((wm // f + 1) * f for f in self._frame_lengths)

    def advance(self, until: int | None = None, *, end_ns: int | None = None) -> list[FrameResult]:
        """Reduce everything before the watermark (or ``until``) and emit frames it completed."""
        if self.timebase is None:
            return []
        wm = self.live_watermark() if until is None else until
        if wm <= self.watermark_ns and end_ns is None:
            return []
        wm = max(wm, self.watermark_ns)
        self.watermark_ns = wm
        # At the end every channel is reduced to it (nothing waits for a later frame).
        boundary = None if end_ns is not None else max(wm // f * f for f in self._frame_lengths)
        self.routes.reduce(wm, self.reducers, boundary)
        if self._ending:
            self._end_channels(wm)
        if self._gone_workers:
            self._end_workers(wm)
        for pid, stream in self.routes.stages.items():
            self.stalls.watch(pid, stream, wm)
        results = self.reducers.close_until(wm, end_ns)
        results += self._host_frames
        self._host_frames = []
        if end_ns is not None:
            # Frames a host never sent (it ended earlier than the run, or was lost): nothing
            # of them was observed here.
            for reducer in self.host_pairs.values():
                results += [dataclasses.replace(r, covered_ns=0)
                            for r in reducer.close_until(wm, end_ns)]  # fmt: skip
        for vq in self.virtual.values():
            if end_ns is None:
                results.extend(vq.advance(wm, self.domains))
            else:
                results.extend(vq.finish(end_ns, self.domains, self.truth_dir))
        drops = self.ledger.close(wm, end_ns)
        if results or drops:
            self.sink(results, drops)
        return results

    def finish(self, end_ns: int) -> list[FrameResult]:
        """Reduce everything up to the end of the run and emit every frame, the last one partial.

        Records of a clock domain that was never calibrated cannot be placed in time: they are
        counted as dropped (in the run's last frame), never silently lost.
        """
        last = max(end_ns - 1, 0)
        for records in self.gate.never_placed():
            kinds = records["kind"]
            probes = records["probe"][(kinds != Kind.DROPPED) & (kinds != Kind.REFUSED)]
            for pid in np.unique(probes).tolist():
                self.ledger.drop(int(pid), last, int((probes == pid).sum()), late=True)
        # No burst came after these (a device that stopped answering): extrapolated, as a last
        # resort, with the bounds that come with it.
        for domain, batch in self.gate.release():
            self._take(domain, batch, hold=False)
        self.routes.count_unrecorded(end_ns, self.reducers)
        out = self.advance(until=end_ns, end_ns=end_ns)
        if self.on_table is not None:
            for rows in self._end_tables(end_ns):
                self.on_table(rows)
        return out

    def path_notes(self) -> list[tuple[str, str]]:
        """What a path's figure is, where its items were not followed (``note`` rows)."""
        out = []
        for lp in self.littles:
            parts = sorted({c.name for c in lp.route})
            out.append(("littles_law", (
                f"latency({lp.target}) is the mean from Little's law over the path (its items "
                f"cannot be followed): each part's item-time over the items that left it, "
                f"through {', '.join(parts) or 'no channel seen'}; no percentile is known"
            )))  # fmt: skip
        return out

    def _end_tables(self, end_ns: int) -> list[endtables.Table]:
        """Everything the run file keeps besides frames, written once at the end."""
        return [
            *self.keeper.tables(end_ns),
            *(endtables.clock_truth_table(self.truth_dir, self.topology)
              if self.truth_dir is not None else ()),
            *endtables.worker_table(
                {**self.routes.gone_stages, **self.routes.stages}, self.routes.worker_of
            ),
            *endtables.ended_table(self.ended, self.routes.left),
            *endtables.stall_table(self.stalls.rows()),
            *endtables.runner_table(self.runner),
            *endtables.service_table(self.service, self.routes.service),
            *endtables.machine_table(self.machine),
            *endtables.link_table(self.links),
            *endtables.host_table(self.hosts),
            *endtables.core_table(self.cores),
            *endtables.exclusion_table(self.trace_excluded),
            *endtables.overhead_table(self.ledger.probe_events, self.cost_model),
        ]  # fmt: skip


def _discard(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
    """A sink that keeps nothing (provisional frames go to the live view only)."""
