"""``queue.Queue`` and ``queue.SimpleQueue`` as a program run as it is makes them, recorded.

In: the program's puts and gets, from whichever of its threads. Out: the same items, waits and
errors as the standard queues', one tail record per insertion and one head record per removal
(when a query watches that end), and the calling threads marked blocked while they wait.
"""

from __future__ import annotations

import queue
import threading
from typing import Any

from streamscope.core import forksafe
from streamscope.core.native import bound_tracker
from streamscope.core.records import State
from streamscope.pipeline.program.auto.channels import ProgramChannel
from streamscope.pipeline.program.auto.stages import (
    made_internally,
    stage,
    thread_state,
    thread_tracker,
)
from streamscope.pipeline.program.auto.waits import waiting

#: The standard library's own classes, which its own code and streamscope's keep getting.
StandardQueue = queue.Queue
StandardSimpleQueue = queue.SimpleQueue
StandardLifoQueue = queue.LifoQueue
StandardPriorityQueue = queue.PriorityQueue


#: The standard condition's steps, called as they are (no ``super()`` made an item).
_WAIT = threading.Condition.wait
_NOTIFY = threading.Condition.notify


class _End(threading.Condition):
    """A queue's ``not_empty`` (``tail``: notified by each put once it stored its item) or
    ``not_full`` (``head``: by each get once it took one): the item is recorded there, under
    the queue's lock, and the calling worker marked blocked (in or out) while it waits."""

    def __init__(self, lock: Any, ss: ProgramChannel, end: str) -> None:
        super().__init__(lock)
        self._ss = ss
        self._tail = end == "tail"
        self._state = int(State.BLOCKED_IN if self._tail else State.BLOCKED_OUT)

    def wait(self, timeout: float | None = None) -> bool:
        tracker = bound_tracker()
        if tracker is None:
            return _WAIT(self, timeout)
        prev = tracker.set(self._state)
        try:
            return _WAIT(self, timeout)
        finally:
            tracker.set(prev)

    def notify(self, n: int = 1) -> None:
        ss = self._ss
        tracker = bound_tracker()
        if self._tail:
            ss.inserted()
            if tracker is not None:
                tracker.gave()
        else:
            ss.removed()
            if tracker is not None:
                tracker.took()
        if self._waiters:  # type: ignore[attr-defined]  # the standard notify, where it wakes anyone
            _NOTIFY(self, n)  # (else it only checks that the lock is held, as it is here)


class AutoQueue(StandardQueue):  # type: ignore[type-arg]
    """``queue.Queue`` as the program made it, its insertions and removals recorded and its
    waits marked. Its ``put`` and ``get`` are the standard ones, step for step, in their own
    frames, and so is its storage (the standard class's or a subclass's): the stacks sampled
    show the queue's own work as the program's and only what is added as streamscope's (a
    copy of the standard steps in streamscope's frames made a program of 2,000 threads report
    44 % of its time as monitoring where 20-25 % was). Each item is recorded where the
    standard ``put`` and ``get`` notify the other side, under the queue's lock, and the
    waits are marked by the same two conditions (``_End``)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        standard = _STANDARD.get(cls)
        if standard is not None and made_internally():
            return standard(*args, **kwargs)  # the standard library's or streamscope's own
        return super().__new__(cls)

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._ss = ss = ProgramChannel(maxsize if maxsize > 0 else 0)
        self.not_empty = _End(self.mutex, ss, "tail")
        self.not_full = _End(self.mutex, ss, "head")

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ss = self._ss
        tracker = bound_tracker() or thread_tracker("out", ss.id)
        if tracker is not ss.put_by or (tracker is None and ss.name is None):
            with self.mutex:  # as it comes, before it may wait for room
                ss.seen("tail", tracker, stage())
        StandardQueue.put(self, item, block, timeout)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ss = self._ss
        tracker = bound_tracker() or thread_tracker("in", ss.id)
        if tracker is not ss.got_by or (tracker is None and ss.name is None):
            with self.mutex:  # as it comes, before it may wait for an item
                ss.seen("head", tracker, stage())
        return StandardQueue.get(self, block, timeout)

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def get_nowait(self) -> Any:
        return self.get(block=False)

    def join(self) -> None:
        """``Queue.join``: the calling worker waits for what it put to be worked off
        downstream, blocked out (as while it waits for room), not busy."""
        with waiting(State.BLOCKED_OUT):
            super().join()


class AutoSimpleQueue(StandardSimpleQueue):  # type: ignore[type-arg]
    """``queue.SimpleQueue`` as the program made it, recorded: unbounded, so only a get waits
    (and is marked blocked while it does)."""

    _ss: ProgramChannel
    _ss_lock: threading.Lock

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is AutoSimpleQueue and made_internally():
            return StandardSimpleQueue()
        q = super().__new__(cls)
        q._ss = ProgramChannel(0)
        q._ss_lock = forksafe.lock()
        return q

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ss = self._ss
        tracker = thread_tracker("out", ss.id)
        # An executor's worker putting into its own work queue wakes the next worker to end
        # (its ``None``): no item of the stage it last worked for.
        waking = getattr(thread_state, "executor_queue", None) == ss.id
        if ss.name is None:
            with self._ss_lock:
                ss.saw("tail", None if waking else stage())
        elif tracker is not ss.put_by:
            with self._ss_lock:
                ss.seen("tail", tracker, None if waking else stage())
        with self._ss_lock:
            super().put(item, block, timeout)
            if self._items(item):
                ss.inserted()
        if tracker is not None:
            tracker.gave()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ss = self._ss
        tracker = thread_tracker("in", ss.id)
        if ss.name is None:
            with self._ss_lock:
                ss.saw("head", stage())
        elif tracker is not ss.got_by:
            with self._ss_lock:
                ss.seen("head", tracker, stage())
        try:
            item = super().get(False)
        except queue.Empty:
            if not block:
                raise
            prev = tracker.set(State.BLOCKED_IN) if tracker is not None else 0
            try:
                item = super().get(True, timeout)
            finally:
                if tracker is not None:
                    tracker.set(prev)
        if self._items(item):
            with self._ss_lock:
                ss.removed()
            if tracker is not None:
                tracker.took()
        return item

    def _items(self, item: Any) -> int:
        """How many of the program's items ``item`` is: one, or none for a library's own,
        such as a pool's end marker (passed on uncounted)."""
        return 1

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def get_nowait(self) -> Any:
        return self.get(block=False)


class AutoLifoQueue(AutoQueue):
    """``queue.LifoQueue`` as the program made it, recorded (the standard one's storage)."""

    _init = StandardLifoQueue._init
    _qsize = StandardLifoQueue._qsize
    _put = StandardLifoQueue._put
    _get = StandardLifoQueue._get


class AutoPriorityQueue(AutoQueue):
    """``queue.PriorityQueue`` as the program made it, recorded (the standard one's storage)."""

    _init = StandardPriorityQueue._init
    _qsize = StandardPriorityQueue._qsize
    _put = StandardPriorityQueue._put
    _get = StandardPriorityQueue._get


#: Each recorded class and the standard one it stands for.
_STANDARD: dict[type, type] = {
    AutoQueue: StandardQueue,
    AutoLifoQueue: StandardLifoQueue,
    AutoPriorityQueue: StandardPriorityQueue,
}

__all__ = [
    "AutoLifoQueue",
    "AutoPriorityQueue",
    "AutoQueue",
    "AutoSimpleQueue",
    "StandardLifoQueue",
    "StandardPriorityQueue",
    "StandardQueue",
    "StandardSimpleQueue",
]
