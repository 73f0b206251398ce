"""The monitor's writes to the run file, in a thread of their own.

In: the store calls the engine makes as frames close (begin, frames, drops, tables, finish).
Out: the same calls on the store, in order, off the drain loop: a slow disk or a file
checkpoint never holds up the draining of the rings; and, after them, what shows their results
live (so what is shown is in the file). The queue between them is bounded, so a
store that cannot keep up slows the monitor down (and the rings refuse, and count) instead of
growing its memory.
"""

from __future__ import annotations

import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import Topology
from streamscope.store.runstore import check_rows
from streamscope.store.writer import QueryRecord, RunMeta, RunStore

#: Store calls waiting at most (each is one drain's frames, a table's rows, ...).
QUEUE_LIMIT = 1024
#: Frames, drops and table rows that piled up while the last write was made are written as one
#: (one transaction), and a write of them starts at most this often (s), or, where writes take
#: long, once ``WRITE_SHARE`` times the last one's time has gone by (at once when a quarter of
#: the queue is waiting): at 10 ms frames a transaction per frame would take the monitor's
#: whole core.
WRITE_EVERY_S = 0.1
WRITE_SHARE = 4

#: A queued store call: a write that may be merged with its neighbours (``frames``, ``drops``,
#: ``table``, and what it writes), what shows what was written (``after``, the call), or any
#: other call (``call``, the call, whether it is made even after a failure).
_Item = tuple[str, Any, bool]


class StoreWriter:
    """A ``RunStore`` whose calls run in a writer thread. ``error`` holds the first failure (the
    calls after it are skipped but ``finish``: the file keeps every call that succeeded, and
    says how the run ended where it can)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.error: BaseException | None = None
        self._queue: queue.Queue[_Item | None] = queue.Queue(QUEUE_LIMIT)
        #: Callers waiting for what was queued so far to be written (``flush``), or for the
        #: run's end (``finish``, ``close``: for good): no pause between writes meanwhile.
        self._hurry = 0
        self._hurry_lock = threading.Lock()
        #: Set when ``_hurry`` grows: ends a pause at once.
        self._woken = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="streamscope-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        stop = False
        while not stop:
            # the writes waiting, up to the next call that is not a write's (``begin``,
            # ``amend``, ``finish``: made in their order), with what shows them (``after``:
            # made once they are, as each was asked, and after the others among them too)
            items = [self._queue.get()]
            while _merged(items[-1]) and len(items) < QUEUE_LIMIT:
                try:
                    items.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            writes = [item for item in items if item is not None and item[0] in _WRITES]
            began = time.monotonic()
            if writes:
                self._make(partial(self._write, writes), always=False)
            took = time.monotonic() - began
            for item in items:
                if item is None:
                    stop = True
                elif item[0] not in _WRITES:
                    self._make(item[1], always=item[2])
            for _ in items:
                self._queue.task_done()
            if writes and not stop:
                # what closes meanwhile is written with the next (the queue is bounded: a
                # full one holds the drain loop back, and the rings refuse and count)
                wait = began + max(WRITE_EVERY_S, WRITE_SHARE * took) - time.monotonic()
                while wait > 0 and self._queue.qsize() < QUEUE_LIMIT // 4 and not self._hurry:
                    self._woken.wait(min(wait, WRITE_EVERY_S))
                    self._woken.clear()  # ``_hurry`` says why, read again above
                    wait = began + max(WRITE_EVERY_S, WRITE_SHARE * took) - time.monotonic()

    def _write(self, writes: list[_Item]) -> None:
        results: list[FrameResult] = []
        drops: list[DropCount] = []
        tables: list[TableRows] = []
        for kind, what, _ in writes:
            if kind == "frames":
                results.extend(what)
            elif kind == "drops":
                drops.extend(what)
            else:
                tables.append(what)
        self.store.write_batch(results, drops, tables)

    def _make(self, call: Callable[[], Any], *, always: bool) -> None:
        if self.error is None or always:
            try:
                call()
            except BaseException as exc:  # reported by the service, never lost
                if self.error is None:
                    # Its words only: a traceback would keep the failed store's objects
                    # (a broken database connection) alive to the end of the process.
                    self.error = exc.with_traceback(None)
                    self.error.__context__ = self.error.__cause__ = None
                del exc

    def _put(self, call: Callable[[], Any], *, always: bool = False) -> None:
        self._queue.put(("call", call, always))

    def begin(self, meta: RunMeta, topology: Topology, queries: Sequence[QueryRecord]) -> None:
        self._put(lambda: self.store.begin(meta, topology, queries))

    def write_frames(self, results: Sequence[FrameResult]) -> None:
        self._queue.put(("frames", results, False))

    def write_drops(self, drops: Sequence[DropCount]) -> None:
        self._queue.put(("drops", drops, False))

    def amend(self, topology: Topology, queries: Sequence[QueryRecord] | None) -> None:
        self._put(lambda: self.store.amend(topology, queries))

    def write_table(self, rows: TableRows) -> None:
        """Checked here, where they are made, and written in the writer's thread."""
        check_rows(rows)
        self._queue.put(("table", rows, False))

    def finish(self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int) -> None:
        """Made even after a failure: how the run ended is written wherever the file allows,
        what is still queued without a pause first (the run is over: nothing more to batch)."""
        self._put(lambda: self.store.finish(status, error, ended_unix_ns, duration_ns), always=True)
        self._hurry_up(1)

    def after_writes(self, call: Callable[[], None]) -> None:
        """Call ``call`` (in the writer's thread) once every store call so far is made, and
        only if all of them succeeded (what it shows is then in the file). What it raises is
        said on stderr: showing a frame is not writing it, and the run goes on."""

        def guarded() -> None:
            try:
                call()
            except Exception as exc:  # a watcher's failure, not the file's
                print(f"streamscope monitor: could not show frames: {exc!r}", file=sys.stderr)

        self._queue.put(("after", guarded, False))

    def flush(self) -> None:
        """Wait until every call so far has been made: the writes waiting are made without
        the pause that batches them (a run's end waited up to two of them, 0.15 s of every
        run's)."""
        self._hurry_up(1)
        try:
            self._queue.join()
        finally:
            self._hurry_up(-1)

    def close(self) -> None:
        """Make the calls still waiting, then stop the thread (the store itself stays open)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._hurry_up(1)
            self._thread.join()

    def _hurry_up(self, by: int) -> None:
        with self._hurry_lock:
            self._hurry += by
        if by > 0:
            self._woken.set()


#: The queued writes merged into one.
_WRITES = frozenset({"frames", "drops", "table"})


def _merged(item: _Item | None) -> bool:
    """Whether ``item`` is a write merged with its neighbours, or what shows one."""
    return item is not None and item[0] != "call"
