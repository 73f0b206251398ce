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
from collections.abc import Callable, Sequence
from typing import Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import Topology
from streamscope.store.runstore import check_rows
from streamscope.store.writer import QueryRecord, RunMeta, RunStore

#: Store calls waiting at most (each is one drain's frames, a table's rows, ...).
QUEUE_LIMIT = 256


class StoreWriter:
    """A ``RunStore`` whose calls run in a writer thread. ``error`` holds the first failure (the
    calls after it are skipped but ``finish``: the file keeps every call that succeeded, and
    says how the run ended where it can)."""

    def __init__(self, store: RunStore) -> None:
        self.store = store
        self.error: BaseException | None = None
        self._queue: queue.Queue[tuple[Callable[[], Any], bool] | None] = queue.Queue(QUEUE_LIMIT)
        self._thread = threading.Thread(target=self._loop, name="streamscope-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            call, always = item
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
            self._queue.task_done()
        self._queue.task_done()

    def _put(self, call: Callable[[], Any], *, always: bool = False) -> None:
        self._queue.put((call, always))

    def begin(self, meta: RunMeta, topology: Topology, queries: Sequence[QueryRecord]) -> None:
        self._put(lambda: self.store.begin(meta, topology, queries))

    def write_frames(self, results: Sequence[FrameResult]) -> None:
        self._put(lambda: self.store.write_frames(results))

    def write_drops(self, drops: Sequence[DropCount]) -> None:
        self._put(lambda: self.store.write_drops(drops))

    def amend(self, topology: Topology, queries: Sequence[QueryRecord] | None) -> None:
        self._put(lambda: self.store.amend(topology, queries))

    def write_table(self, rows: TableRows) -> None:
        """Checked here, where they are made, and written in the writer's thread."""
        check_rows(rows)
        self._put(lambda: self.store.write_table(rows))

    def finish(self, status: str, error: str | None, ended_unix_ns: int, duration_ns: int) -> None:
        """Made even after a failure: how the run ended is written wherever the file allows."""
        self._put(lambda: self.store.finish(status, error, ended_unix_ns, duration_ns), always=True)

    def after_writes(self, call: Callable[[], None]) -> None:
        """Call ``call`` (in the writer's thread) once every store call so far is made, and
        only if all of them succeeded (what it shows is then in the file). What it raises is
        said on stderr: showing a frame is not writing it, and the run goes on."""

        def guarded() -> None:
            try:
                call()
            except Exception as exc:  # a watcher's failure, not the file's
                print(f"streamscope monitor: could not show frames: {exc!r}", file=sys.stderr)

        self._put(guarded)

    def flush(self) -> None:
        """Wait until every call so far has been made."""
        self._queue.join()

    def close(self) -> None:
        """Make the calls still waiting, then stop the thread (the store itself stays open)."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join()
