"""A device's agent: reduces some of the device's own rings where they are written (Lancaster,
Wingbermuehle, Beard & Chamberlain, Crossing Boundaries in TimeTrial, 2011).

In: private rings filled by the device's threads, drained every ``flush_interval_s`` by a
background thread that never blocks a stage. Out: per-frame SUMMARY messages of the sub-queues it
reduces, and BATCH messages of the records the monitor needs raw as well (a state tracker a query
watches, a channel being traced), on the device's control link. Every other ring of the device is
drained by the monitor directly, like the host's.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from streamscope.core import options
from streamscope.core.records import Kind, Records, empty_records, make_records
from streamscope.core.topology import HOST
from streamscope.probes.taps import Tap
from streamscope.transport.control import Control
from streamscope.transport.wire import MsgType

#: How often an agent ships its records (seconds): ``RunOptions.flush_interval_s``'s default.
DEFAULT_FLUSH_INTERVAL_S = options.DEFAULT_FLUSH_INTERVAL_S


class LocalReducer(Protocol):
    """Reduces some taps' records where they are taken (a device, as in Crossing Boundaries in
    TimeTrial): it keeps the
    records it reduces and returns encoded per-frame summaries for SUMMARY messages."""

    def reduce(self, records: Records, watermark: int) -> tuple[Records, list[bytes]]: ...

    def finish(self, end: int) -> list[bytes]: ...

    def hold(self, watermark: int, floor: int) -> int:
        """The watermark to send (no later than what it has still to summarise)."""
        ...


class Agent:
    """Collects the private taps of one device process and flushes them in batches.

    The watermark sent with a batch promises that every record this agent will still send has
    ticks at or after it: it is the start time of the *previous* flush, which leaves a whole
    flush interval for a writer that read the clock but had not yet stored the record.
    """

    def __init__(
        self,
        control: Control,
        now: Callable[[], int],
        *,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        domain: str = HOST,
        local: LocalReducer | None = None,
    ) -> None:
        self.agent_id = control.agent_id
        self._local = local
        #: The cores that reduce what it sends, by name (an RTL device's): their ``stats`` are
        #: final once it has closed.
        self.cores: dict[str, Any] = {}
        self._control = control
        self._now = now
        self._interval = flush_interval_s
        self._taps: list[Tap] = []
        self._holders: list[Callable[[], int | None]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = os.getpid()
        self._prev_flush = now()
        self._first = self._prev_flush  #: its first time: what it holds back to, with no grid
        self._closed = False
        self.sent_records = 0
        self.sent_dropped = 0
        # A data agent: the monitor waits for its watermark before closing frames.
        self._send(
            MsgType.HELLO,
            self._prev_flush,
            info={"domain": domain, "pid": self._pid, "data": True},
        )

    def add(self, tap: Tap) -> None:
        with self._lock:
            self._taps.append(tap)

    def hold(self, oldest: Callable[[], int | None]) -> None:
        """Hold every watermark back to ``oldest()``: the ticks of the oldest record a writer
        that stores records late (a probe core read over a link) may still store (None: none)."""
        with self._lock:
            self._holders.append(oldest)

    def start(self) -> None:
        """Start the background flusher (call after any fork of this process)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._loop, name=f"streamscope-agent-{self.agent_id}", daemon=True
            )
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def _collect(self, now: int) -> Records:
        parts: list[Records] = []
        drops: list[tuple[int, int, int]] = []
        for tap in self._taps:
            records, dropped = tap.drain()
            if len(records):
                parts.append(records)
            if dropped:
                drops.append((tap.probe, dropped, tap.refused))
        if drops:
            # Each probe that refused: how many (DROPPED), and the latest refused value (REFUSED).
            probes = np.array([p for p, _, _ in drops], dtype=np.int64)
            at = np.full(len(drops), now, dtype=np.int64)
            for kind, col in ((Kind.DROPPED, 1), (Kind.REFUSED, 2)):
                vals = np.array([d[col] for d in drops], dtype=np.int64)
                parts.append(make_records(int(kind), 0, at, vals))
                parts[-1]["probe"] = probes
            self.sent_dropped += sum(d for _, d, _ in drops)
        if not parts:
            return empty_records()
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def flush(self, *, final: bool = False) -> None:
        """Drain every tap and send one batch. ``final``: no writer is still running."""
        with self._lock:
            if self._closed:
                return
            now = self._now()
            held = [] if final else [t for t in (h() for h in self._holders) if t is not None]
            records = self._collect(now)
            watermark = now if final else min([self._prev_flush, *held])
            self._prev_flush = now
            summaries: list[bytes] = []
            if self._local is not None:
                records, summaries = self._local.reduce(records, watermark)
                if final:
                    summaries += self._local.finish(now)
                else:
                    watermark = self._local.hold(watermark, self._first)
            self.sent_records += len(records)
            # The summaries first: the batch's watermark may let the monitor close their frames.
            for payload in summaries:
                self._send(MsgType.SUMMARY, watermark, payload=payload)
            self._send(MsgType.BATCH, watermark, records=records)

    def close(self, *, final: bool = True) -> None:
        """Stop the flusher, send what is left, then END. Safe to call twice."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)
        self.flush(final=final)
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._send(MsgType.END, self._now())

    def _send(
        self,
        mtype: MsgType,
        watermark: int,
        *,
        records: Records | None = None,
        info: dict[str, object] | None = None,
        payload: bytes | None = None,
    ) -> None:
        if not self._control.send(mtype, watermark, records=records, info=info, payload=payload):
            # The monitor is gone: the application must not fail because monitoring did.
            self._closed = True
