"""Channels between stages: a bounded in-process FIFO and its tap hooks.

In: items from a producer stage. Out: the same items, in order, at the consumer; and, when a
query needs it, one tail record per insertion and one head record per removal.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from typing import Any

from streamscope.core.clock import host_now_ticks
from streamscope.core.records import State
from streamscope.probes.taps import LockedTap, StateTracker

#: This process's clock, read by every tap in it. A process with a clock of its own (an emulated
#: device) rebinds it once, right after it starts, with ``use_clock``.
now_ticks: Callable[[], int] = host_now_ticks


def use_clock(now: Callable[[], int]) -> None:
    """Make every channel tap of this process read ``now`` (in a freshly forked stage process)."""
    global now_ticks
    now_ticks = now
    from streamscope.pipeline import shm

    shm.now_ticks = now


class EndOfStream:
    """The marker a finished producer leaves in each of its output channels."""

    _instance: EndOfStream | None = None

    def __new__(cls) -> EndOfStream:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "EOS"


EOS = EndOfStream()


class Aborted(Exception):
    """Raised in a stage whose channel was aborted because the run is stopping."""


class ThreadChannel(queue.Queue[Any]):
    """A ``queue.Queue`` whose insertions and removals can be tapped.

    The taps are written inside ``_put``/``_get``, which ``queue.Queue`` calls with its own mutex
    held: the records are in the exact order of the operations, and cost no lock of their own.
    The end-of-stream marker is not an item and is not recorded.
    """

    def __init__(self, maxsize: int = 0, *, name: str = "") -> None:
        super().__init__(maxsize)
        self.name = name
        self.tail: LockedTap | None = None
        self.head: LockedTap | None = None
        self.aborted = False

    def _put(self, item: Any) -> None:
        self.queue.append(item)
        tap = self.tail
        if tap is not None and item is not EOS:
            b = tap.buf
            if len(b) < tap.cap:
                b.append(now_ticks())
            else:
                tap.dropped += 1

    def _get(self) -> Any:
        item = self.queue.popleft()
        tap = self.head
        if tap is not None and item is not EOS:
            b = tap.buf
            if len(b) < tap.cap:
                b.append(now_ticks())
            else:
                tap.dropped += 1
        return item

    def _qsize(self) -> int:
        return len(self.queue)

    def put_tracked(self, item: Any, tracker: StateTracker | None) -> None:
        """``put`` that marks the stage blocked-on-output only while it really waits.

        ``queue.Queue.put`` with the state change inside its own lock, where the wait starts
        and ends: no failed non-blocking attempt (an exception) before each wait.
        """
        if tracker is None:
            self.put(item)
        else:
            with self.not_full:
                if 0 < self.maxsize <= self._qsize():
                    prev = tracker.set(State.BLOCKED_OUT)
                    while 0 < self.maxsize <= self._qsize():
                        self.not_full.wait()
                    tracker.set(prev)
                self._put(item)
                self.unfinished_tasks += 1
                self.not_empty.notify()
        if self.aborted:
            raise Aborted(self.name)

    def get_tracked(self, tracker: StateTracker | None) -> Any:
        """``get`` that marks the stage blocked-on-input only while it really waits (as
        ``put_tracked``, inside the queue's lock)."""
        if tracker is None:
            item = self.get()
        else:
            with self.not_empty:
                if not self._qsize():
                    prev = tracker.set(State.BLOCKED_IN)
                    while not self._qsize():
                        self.not_empty.wait()
                    tracker.set(prev)
                item = self._get()
                self.not_full.notify()
        if self.aborted:
            raise Aborted(self.name)
        return item

    def abort(self) -> None:
        """Wake every waiter for good: the run is stopping (a stage failed or Ctrl-C)."""
        with self.mutex:
            self.aborted = True
            self.queue.clear()
            self.queue.append(EOS)
            self.not_empty.notify_all()
            self.not_full.notify_all()
            self.maxsize = 0
