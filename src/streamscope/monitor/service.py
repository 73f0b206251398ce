"""The monitor service: receives agent messages, drives the engine, writes the run file.

In: encoded messages from agents (a Unix socket for other processes, a queue for its own).
Out: frames and drop counts in the store as frames close, and the run's final status — also when
the application dies without saying goodbye.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import queue
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.topology import Topology
from streamscope.monitor.engine import Engine, crossing_channels
from streamscope.query.compile import Plan
from streamscope.store.writer import QueryRecord, RunMeta, RunStore
from streamscope.transport.wire import (
    HEADER_SIZE,
    Message,
    MsgType,
    WireError,
    decode,
    decode_header,
    decode_payload,
)

#: Main agent id: the process that runs the pipeline and reports its outcome.
MAIN_AGENT = 0
#: After FINISH, how long to wait for other agents' last batches.
GRACE_S = 5.0
#: How often the engine reduces when messages keep arriving.
ADVANCE_EVERY_S = 0.05


@dataclass(frozen=True, slots=True)
class _Disconnect:
    agent: int


@dataclass(frozen=True, slots=True)
class Final:
    status: str
    error: str | None
    duration_ns: int
    events: int
    late: int


class _TickType:
    """Nothing arrived within the polling interval."""


_Tick = _TickType()


def query_records(plan: Plan, topology: Topology | None = None) -> list[QueryRecord]:
    """What the run file says about each compiled query."""
    crossing = crossing_channels(topology) if topology is not None else frozenset()
    out = []
    for q in plan.queries:
        stats = tuple(dict.fromkeys(s.stat for t in q.targets for s in t.specs))
        if any(t.name in crossing for t in q.targets):
            stats += ("violations", "uncertainty_ns")
        targets = tuple(t.name for t in q.targets)
        out.append(QueryRecord(q.id, q.text, q.metric, q.unit, q.frame_ns, targets, stats))
    return out


Inbox = queue.SimpleQueue[bytes | Message | _Disconnect | None]


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)


class MonitorService:
    def __init__(
        self,
        plan: Plan,
        topology: Topology,
        store: RunStore,
        *,
        meta: RunMeta,
        drop_frame_ns: int,
        clock_method: str = "hull",
        socket_path: str | None = None,
        on_frames: Callable[[Sequence[FrameResult], Sequence[DropCount]], None] | None = None,
        truth_dir: str | None = None,
        trace: bool = False,
    ) -> None:
        self.store = store
        self._meta = meta
        self._records = query_records(plan, topology)
        self._topology = topology
        self._begun = False
        self.inbox: Inbox = queue.SimpleQueue()
        self._on_frames = on_frames
        self.engine = Engine(
            plan, topology, drop_frame_ns, self._write, self._write_table, method=clock_method,
            truth_dir=truth_dir, trace=trace,
        )  # fmt: skip
        self.socket_path = socket_path
        self._server: socket.socket | None = None
        self.bad_messages = 0
        if socket_path is not None:
            self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server.bind(socket_path)
            os.chmod(socket_path, 0o600)
            self._server.listen(64)
            threading.Thread(target=self._accept, name="streamscope-accept", daemon=True).start()

    def _write(self, results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        if results:
            self.store.write_frames(results)
        if drops:
            self.store.write_drops(drops)
        if self._on_frames is not None:
            self._on_frames(results, drops)

    def _write_table(self, table: str, columns: dict[str, Any]) -> None:
        if self._begun:
            self.store.write_table(table, columns)

    def _accept(self) -> None:
        assert self._server is not None
        while True:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._reader, args=(conn,), daemon=True).start()

    def _reader(self, conn: socket.socket) -> None:
        agent: int | None = None
        try:
            while True:
                header = _read_exact(conn, HEADER_SIZE)
                if header is None:
                    break
                kind, agent_id, pid, wm, length, count = decode_header(header)
                payload = _read_exact(conn, length) if length else b""
                if payload is None:
                    break
                agent = agent_id
                self.inbox.put(decode_payload(kind, agent_id, pid, wm, count, payload))
        except (WireError, OSError) as exc:
            self.bad_messages += 1
            print(f"streamscope monitor: dropped a connection: {exc}", file=sys.stderr)
        finally:
            conn.close()
            if agent is not None:
                self.inbox.put(_Disconnect(agent))

    def serve(self) -> Final:
        """Run until the run is over; returns its final status. Everything received is kept."""
        finish: Message | None = None
        finish_at = 0.0
        last_advance = time.monotonic()
        main_gone_at: float | None = None
        while True:
            timeout = ADVANCE_EVERY_S
            got: bytes | Message | _Disconnect | _TickType | None
            try:
                got = self.inbox.get(timeout=timeout)
            except queue.Empty:
                got = _Tick
            item = _Disconnect(MAIN_AGENT) if got is None else got
            if isinstance(item, bytes):
                item = decode(item)
            if isinstance(item, Message):
                if item.type == MsgType.START:
                    self._begin(item.watermark)
                if item.type == MsgType.FINISH:
                    finish, finish_at = item, time.monotonic()
                else:
                    self.engine.handle(item)
            elif isinstance(item, _Disconnect):
                self.engine.disconnect(item.agent)
                if item.agent == MAIN_AGENT and main_gone_at is None:
                    main_gone_at = time.monotonic()
            now = time.monotonic()
            if now - last_advance >= ADVANCE_EVERY_S:
                self.engine.advance()
                last_advance = now
            others_live = any(not a.ended for k, a in self.engine.agents.items() if k != MAIN_AGENT)
            if finish is not None and (not others_live or now - finish_at > GRACE_S):
                return self._finish(
                    finish.info.get("status", "completed"),
                    finish.info.get("error"),
                    finish.watermark,
                )
            gone_long = main_gone_at is not None and now - main_gone_at > GRACE_S
            if finish is None and main_gone_at is not None and (not others_live or gone_long):
                return self._finish(
                    "failed",
                    "the application process ended without finishing the run (killed?)",
                    None,
                )

    def _begin(self, t0_ticks: int) -> None:
        """The run file starts when the run does, with its virtual time zero."""
        if not self._begun:
            meta = dataclasses.replace(
                self._meta, t0_host_ns=t0_ticks, started_unix_ns=time.time_ns()
            )
            self.store.begin(meta, self._topology, self._records)
            self._begun = True

    def _finish(self, status: str, error: str | None, end_ticks: int | None) -> Final:
        self._begin(0)  # a run that never started still gets a file that says how it ended
        eng = self.engine
        if eng.timebase is None:
            end_ns = 0
        elif end_ticks is None:
            end_ns = max(
                eng.watermark_ns, max((a.watermark_ns for a in eng.agents.values()), default=0)
            )
        else:
            # Never end before what was already reduced: the last frame's time must add up.
            end_ns = max(eng.timebase.scalar_to_ns(end_ticks), eng.watermark_ns)
        eng.finish(end_ns)
        self.store.finish(status, error, time.time_ns(), end_ns)
        self.close()
        return Final(status, error, end_ns, eng.events_seen, eng.late)

    def close(self) -> None:
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.close()
            if self.socket_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
            self._server = None


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
