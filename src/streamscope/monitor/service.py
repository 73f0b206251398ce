"""The monitor service: drains the run's rings, reads control messages, drives the engine, writes
the run file.

In: probe rings in the run's ring directory (drained every ``DRAIN_S``) and encoded control
messages from the application's processes (a Unix socket; a queue for its own process). Out:
frames and drop counts in the store as frames close, the monitor's own lag and CPU per frame,
and the run's final status -- also when the application dies without saying goodbye.

It never holds more than one drain of records at a time: when it falls behind, the rings fill
and refuse, and every refusal is counted at its probe.
"""

from __future__ import annotations

import dataclasses
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import native
from streamscope.core.modes import RunStatus, parse
from streamscope.core.safetext import safe_text
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import Topology
from streamscope.monitor.control import INBOX_LIMIT, ControlServer, Disconnect, Inbox
from streamscope.monitor.draining import Drainer, MonitorStats
from streamscope.monitor.engine import Engine
from streamscope.monitor.ringset import RingSet
from streamscope.monitor.settings import MonitorSettings
from streamscope.monitor.writer import StoreWriter
from streamscope.probes.cost import CostBook
from streamscope.query.plan import Plan
from streamscope.store.writer import QueryRecord, RunStore
from streamscope.transport.wire import (
    Message,
    MsgType,
    decode,
)

#: Main agent id: the process that runs the pipeline and reports its outcome.
MAIN_AGENT = 0
#: After FINISH, how long to wait for device agents' last batches.
GRACE_S = 5.0
#: How often the rings are drained and the engine reduces.
DRAIN_S = 0.02
#: The longest rest after a long cycle (s): a ring of the default capacity (65,536 records)
#: written a million times a second is not full yet.
MAX_REST_S = 0.05
#: How often, while frames wait for a clock's next calibration, the live view is shown them
#: provisionally (ns; only when something watches the run live).
PROVISIONAL_EVERY_NS = 500_000_000
#: Records drained since the last reduction that make the engine reduce before a frame closes
#: (what the monitor holds between two reductions stays bounded).
ADVANCE_RECORDS = 1 << 19


@dataclass(frozen=True, slots=True)
class Final:
    """How the monitor finished the run: its status and why, its length (virtual ns), and
    the events it saw and those too late to place."""

    status: RunStatus
    error: str | None
    duration_ns: int
    events: int
    late: int


#: How often, at most, the run file's topology is grown while the run goes on, and its
#: queries' rows (every target of theirs) rewritten.
AMEND_EVERY_NS = 1_000_000_000
QUERIES_EVERY_NS = 10_000_000_000


def query_records(plan: Plan, topology: Topology | None = None) -> list[QueryRecord]:
    """What the run file says about each compiled query."""
    names = (t.name for q in plan.queries for t in q.targets)
    crossing = topology.crossing_targets(names) if topology is not None else frozenset()
    out = []
    for q in plan.queries:
        stats = tuple(dict.fromkeys(s.stat for t in q.targets for s in t.specs))
        if any(t.name in crossing for t in q.targets):
            stats += ("violations", "uncertainty_ns")
        targets = tuple(t.name for t in q.targets)
        out.append(QueryRecord(q.id, q.text, q.metric, q.unit, q.frame_ns, targets, stats))
    return out


def next_cycle(began: float, done: float) -> float:
    """When the cycle after one that ran from ``began`` to ``done`` (s) starts: ``DRAIN_S``
    after it began, and a cycle that took long (a program of many rings, each drained and
    reduced apart) is followed by as long a rest, ``MAX_REST_S`` at most: the monitor takes
    half a core at most from the program it watches, and each ring gives more records a cycle
    (a program of 500 threads and queues: its window 0.87-1.07 s with the monitor cycling all
    along, 0.90-0.95 s so, its threads waiting for items 9,300-10,400 times, not 15,000-17,000)."""
    return max(began + DRAIN_S, done + min(done - began, MAX_REST_S))


class MonitorService:
    """The monitor of one run: serves until the application says it finished (or is gone),
    then finishes the run file."""

    def __init__(
        self,
        plan: Plan,
        topology: Topology,
        store: RunStore,
        settings: MonitorSettings,
        *,
        listener: socket.socket | None = None,
        socket_path: str | None = None,
        ring_dir: str | None = None,
        on_frames: Callable[[Sequence[FrameResult], Sequence[DropCount]], None] | None = None,
        on_lag: Callable[[int], None] | None = None,
        on_broken: Callable[[str], None] | None = None,
        on_note: Callable[[str], None] | None = None,
    ) -> None:
        """``listener``: the control socket, listening already (else ``socket_path`` is bound
        here; neither: only ``inbox`` reaches it); ``ring_dir``: the probes' rings. The
        callbacks: frames as they close, the monitor's lag, why it broke, what it says."""
        self.store = store
        #: Every store call runs in the writer's thread, off the drain loop.
        self.writer = StoreWriter(store)
        self._meta = settings.meta
        opts = settings.options
        self._records = query_records(plan, topology)
        self._topology = topology
        self._begun = False
        #: Declarations grew the topology (and the queries' targets) since the run file last
        #: said so, and when it may say so next (monotonic ns).
        self._grown = self._stale = False
        self._amend_at = self._queries_at = 0
        self.inbox: Inbox = queue.Queue(INBOX_LIMIT)
        self.control = ControlServer(self.inbox, listener, socket_path)
        self._on_frames = on_frames
        self._on_lag = on_lag
        self._on_broken = on_broken
        #: Said to whoever watches the run live (a stage that stalls, and goes on).
        self._on_note = on_note
        self._noted: dict[tuple[str, int], int] = {}
        #: Why this monitor can no longer record the run (the run file failed); None while it can.
        self.broken: str | None = None
        #: How far the drained timeline trails real time now (ns), as of the last drain.
        self.lag_ns = 0
        self.engine = Engine(
            plan, topology, opts.frame_ns, self._write, self._write_table,
            method=opts.clock_method, truth_dir=settings.truth_dir, trace=opts.trace,
            stall_ns=opts.stall_ns, flight_records=opts.flight_records,
            vq_tolerance=opts.vq_tolerance,
        )  # fmt: skip
        self.frame_ns = opts.frame_ns
        self.rings = RingSet(ring_dir, topology, self._declare) if ring_dir is not None else None
        self.drainer = Drainer(self.rings, self.engine) if self.rings is not None else None
        self.costs = CostBook()
        self._t0: int | None = None
        self._provisional_at = 0
        self._due = 0  # the engine reduces once the watermark passes this (virtual ns)
        self._pending = 0  # records drained since the engine last reduced
        self.stats = MonitorStats(opts.frame_ns, time.process_time_ns())
        #: How the application said the run ended, and when that came; when its link closed.
        self._finish_msg: Message | None = None
        self._finish_at = 0.0
        self._main_gone_at: float | None = None

    # -- output --------------------------------------------------------------------------------

    def _write(self, results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        """Frames and drop counts into the run file; shown to whoever watches only once they
        are in it (by the writer, after its commit): a frame seen live is never lost, even if
        the monitor is killed right after."""
        if results:
            self.writer.write_frames(results)
        if drops:
            self.writer.write_drops(drops)
        if self._on_frames is not None or self._on_lag is not None:
            self.writer.after_writes(self._shown(results, drops, self.lag_ns))

    def _shown(
        self, results: Sequence[FrameResult], drops: Sequence[DropCount], lag_ns: int
    ) -> Callable[[], None]:
        def show() -> None:
            if self._on_frames is not None:
                self._on_frames(results, drops)
            if self._on_lag is not None:
                self._on_lag(lag_ns)

        return show

    def _write_table(self, rows: TableRows) -> None:
        if self._begun:
            self.writer.write_table(rows)

    # -- the loop ------------------------------------------------------------------------------

    def serve(self) -> Final:
        """Run until the run is over; returns its final status. Everything received is kept."""
        next_drain = time.monotonic()
        while True:
            wait = max(0.0, next_drain - time.monotonic())
            try:
                got = self.inbox.get(timeout=wait) if wait > 0 else self.inbox.get_nowait()
            except queue.Empty:
                pass  # time to drain
            else:
                self._receive(got)
            now = time.monotonic()
            if now >= next_drain:
                # What came before this drain first: an agent announced then (or its hello)
                # must hold frames back before the rings' watermark moves past its records.
                for _ in range(self.inbox.qsize()):
                    try:
                        self._receive(self.inbox.get_nowait())
                    except queue.Empty:
                        break
                self._cycle()
                next_drain = next_cycle(now, time.monotonic())
            if self.writer.error is not None and self.broken is None:
                # The run file can take nothing more (a full disk): the run must stop now.
                self.broken = f"the run file could not be written: {self.writer.error}"
                if self._on_broken is not None:
                    self._on_broken(self.broken)
            final = self._ended(now)
            if final is not None:
                return final

    def _receive(self, got: bytes | Message | Disconnect | None) -> None:
        """One item of the inbox: a message (encoded, from this process), or a closed link
        (None: the application's own)."""
        item = Disconnect(MAIN_AGENT) if got is None else got
        if isinstance(item, bytes):
            item = decode(item)
        if isinstance(item, Message):
            if item.type == MsgType.START:
                self._begin(item.watermark)
            if item.type == MsgType.FINISH:
                self._finish_msg, self._finish_at = item, time.monotonic()
            else:
                self._handle(item)
        elif isinstance(item, Disconnect):
            self.engine.disconnect(item.agent)
            if item.agent == MAIN_AGENT and self._main_gone_at is None:
                self._main_gone_at = time.monotonic()

    def _ended(self, now: float) -> Final | None:
        """The run file finished, once the application said how the run ended and the device
        agents are done (or a grace period passed); or as failed, once the application is gone
        without saying it."""
        others_live = any(
            a.data and not a.ended for k, a in self.engine.agents.items() if k != MAIN_AGENT
        )
        finish = self._finish_msg
        if finish is not None and (not others_live or now - self._finish_at > GRACE_S):
            status = parse(RunStatus, finish.info.get("status", "completed"), "run status")
            notes = [(str(a), str(t)) for a, t in finish.info.get("notes", ())]
            return self._finish(status, finish.info.get("error"), finish.watermark, notes)
        gone = self._main_gone_at
        if finish is None and gone is not None and (not others_live or now - gone > GRACE_S):
            return self._finish(
                RunStatus.FAILED,
                "the application process ended without finishing the run (killed?)",
                None,
            )
        return None

    def _cycle(self, *, final: bool = False) -> None:
        """Drain every ring into the engine, move the watermark, reduce what it passed."""
        eng = self.engine
        if eng.timebase is None or self._t0 is None:
            return  # the run has not started: records wait in their rings
        t_now = native.host_ns()  # read before any ring: no record still to come is older
        n = self.drainer.drain(t_now, self._t0, final=final) if self.drainer is not None else 0
        # Reduce when a frame can close, or when enough records wait: an advance costs the same
        # whether it carries one drain's records or many, and frames close no later.
        live = eng.live_watermark()
        self.lag_ns = max((t_now - self._t0) - live, 0)
        self._pending += n
        if final or live >= self._due or self._pending >= ADVANCE_RECORDS:
            eng.advance()
            self._due = eng.next_due()
            self._pending = 0
        if self._grown or self._stale:
            self._amend(time.monotonic_ns())
        if self._on_note is not None:
            self._note_stalls()
        if self._on_frames is not None and not final and t_now >= self._provisional_at:
            self._provisional_at = t_now + PROVISIONAL_EVERY_NS
            shown = eng.provisional()
            if shown:
                self._on_frames(shown, ())
        self.stats.add(t_now - self._t0, self.lag_ns, n, time.process_time_ns())
        self._write_monitor_stats(eng.watermark_ns // self.frame_ns)

    def _declare(self, *found: Topology) -> None:
        """Stages, channels and probes a program made while it ran (declared since the last
        drain): measured from now on, and the run file's topology and queries say so."""
        if self.engine.declare(*found):
            self._grown = self._stale = True
            self._amend(time.monotonic_ns())

    def _amend(self, now: int | None) -> None:
        """The run file's topology grown by what was declared (appended) and its queries' new
        targets: at most once per ``AMEND_EVERY_NS`` while the run goes on (a program making
        a thousand queues a second costs the file one write a second), the queries' rows (which
        list every target) once per ``QUERIES_EVERY_NS``; everything at the end (``now``
        None)."""
        if not self._begun or not (self._grown or self._stale):
            return
        if now is not None and now < self._amend_at:
            return
        eng = self.engine
        self._topology = eng.topology
        queries = self._stale and (now is None or now >= self._queries_at)
        if queries:
            self._records = query_records(eng.plan, eng.topology)
        self.writer.amend(self._topology, self._records if queries else None)
        self._grown = False
        if queries:
            self._stale = False
        if now is not None:
            self._amend_at = now + AMEND_EVERY_NS
            if queries:
                self._queries_at = now + QUERIES_EVERY_NS

    def _write_monitor_stats(self, before_frame: int | None) -> None:
        """The monitor's own figures of the frames before ``before_frame`` (None: all)."""
        if not self._begun:
            return
        rows = self.stats.rows_before(before_frame)
        if rows is not None:
            self.writer.write_table(TableRows("monitor", rows))

    def _handle(self, msg: Message) -> None:
        """One message into the engine. One that makes no sense (fields of the wrong type or
        out of range, which decoding cannot see) is refused and said, and the run goes on."""
        try:
            self.engine.handle(msg)
        except (ValueError, TypeError, KeyError, IndexError, AttributeError, OverflowError) as e:
            self.control.bad_messages += 1
            said = f"{type(e).__name__}: {e}"  # it may quote what the program sent
            print(
                f"streamscope monitor: refused a {msg.type.name} message from agent {msg.agent}: "
                f"{safe_text(said)}",
                file=sys.stderr,
            )

    def _note_stalls(self) -> None:
        """Say when a stage stalls (busy past the limit without finishing) and when it goes on."""
        assert self._on_note is not None
        now = {(x.stage, x.start_ns): x.end_ns for x in self.engine.current_stalls()}
        for key, end in now.items():
            if key not in self._noted:
                self._on_note(
                    f"stage {key[0]!r} has been busy for {(end - key[1]) / 1e9:.1f} s without "
                    "finishing anything: hung, or one item takes that long"
                )
        for key, end in self._noted.items():
            if key not in now:
                self._on_note(f"stage {key[0]!r} went on after {(end - key[1]) / 1e9:.1f} s")
        self._noted = now

    def _begin(self, t0_ticks: int) -> None:
        """The run file starts when the run does, with its virtual time zero."""
        if not self._begun:
            meta = dataclasses.replace(
                self._meta, t0_host_ns=t0_ticks, started_unix_ns=time.time_ns()
            )
            self.writer.begin(meta, self._topology, self._records)
            self._begun = True
        if self._t0 is None:
            self._t0 = t0_ticks

    def _finish(
        self,
        status: RunStatus,
        error: str | None,
        end_ticks: int | None,
        notes: Sequence[tuple[str, str]] = (),
    ) -> Final:
        self._begin(0)  # a run that never started still gets a file that says how it ended
        eng = self.engine
        if eng.timebase is not None:
            # Every writer is done (or gone): take what the rings still hold, a budget at a time.
            self._cycle(final=True)
            while self.rings is not None and self.rings.pending() > 0:
                self._cycle(final=True)
        if eng.timebase is None:
            end_ns = 0
        elif end_ticks is None:
            end_ns = max(
                eng.watermark_ns, max((a.watermark_ns for a in eng.agents.values()), default=0)
            )
        else:
            # Never end before what was already reduced: the last frame's time must add up.
            end_ns = max(eng.timebase.scalar_to_ns(end_ticks), eng.watermark_ns)
        if self.rings is not None:
            book = self.costs
            book.add_rings(
                {p: (c.ns, c.n, c.events, c.cost_class) for p, c in self.rings.costs().items()}
            )
            eng.cost_model = book.model(eng.topology)
        self._amend(None)
        eng.finish(end_ns)
        notes = [*notes, *eng.path_notes(), *(self.rings.damage_notes() if self.rings else ())]
        if notes:
            self.writer.write_table(TableRows("note", {
                "about": [a for a, _ in notes], "text": [t for _, t in notes],
            }))  # fmt: skip
        self._write_monitor_stats(None)
        self.writer.flush()
        if self.writer.error is not None and status == RunStatus.COMPLETED:
            status, error = (
                RunStatus.FAILED,
                f"the run file could not be written: {self.writer.error}",
            )
        self.writer.finish(status, error, time.time_ns(), end_ns)
        self.writer.close()
        self.close()
        return Final(status, error, end_ns, eng.events_seen, eng.late)

    def close(self) -> None:
        if self.rings is not None:
            self.rings.close()
        self.control.close()


class InlineMonitor:
    """A ``MonitorService`` serving in a thread of this process (tests, drop-in sessions)."""

    def __init__(self, service: MonitorService) -> None:
        self.service = service
        self._finals: list[Final] = []
        self._thread = threading.Thread(
            target=lambda: self._finals.append(service.serve()),
            name="streamscope-monitor",
            daemon=True,
        )
        self._thread.start()

    def join(self) -> Final | None:
        """Wait until the run is finished and written; None if the service itself broke."""
        self._thread.join()
        return self._finals[0] if self._finals else None
