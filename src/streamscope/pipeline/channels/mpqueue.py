"""``multiprocessing`` queues monitored from every process that uses them.

In: items put and taken in any process of the program. Out: one tail record per insertion and
one head record per removal, numbered in shared memory so that records from different processes
still say exactly how many items were in the queue (``MPQueue``; ``MPQueueFace`` is what it
shares with the queue of a program run as it is, ``pipeline.program.auto.mpqueue``).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import queue
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from streamscope.core import native
from streamscope.core.errors import ConfigError
from streamscope.core.records import Kind, State
from streamscope.pipeline.program.registry import REGISTRY
from streamscope.probes.taps import COST_CALL, RingTap


class MPQueueFace(ABC):
    """What a monitored ``multiprocessing`` queue shows besides ``put`` and ``get``, over the
    plain queue ``_q`` it wraps and its shared counts (``MPQueue`` and the instrumented queue of
    a program run as it is)."""

    _q: Any
    _seq_in: Any
    _seq_out: Any
    capacity: int

    @abstractmethod
    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None: ...

    @abstractmethod
    def get(self, block: bool = True, timeout: float | None = None) -> Any: ...

    _free: Any

    def _take(self, tracker: native.StateTracker | None, block: bool, timeout: float | None) -> Any:
        """The next item of ``_q``, the waiting thread marked blocked in only while it waits."""
        if tracker is None or not block:
            return self._q.get(block, timeout)
        try:
            return self._q.get(False)
        except queue.Empty:
            prev = tracker.set(State.BLOCKED_IN)
            try:
                return self._q.get(True, timeout)
            finally:
                tracker.set(prev)

    def _take_place(
        self,
        tracker: Callable[[], native.StateTracker | None],
        block: bool,
        timeout: float | None,
    ) -> None:
        """A place in the bounded queue for the next item, the waiting thread marked blocked
        out only while it waits (its tracker looked up only then)."""
        free = self._free
        if free is None or free.acquire(False):
            return
        if not block:
            raise queue.Full
        waiting = tracker()
        prev = waiting.set(State.BLOCKED_OUT) if waiting is not None else 0
        try:
            if not free.acquire(True, timeout):
                raise queue.Full
        finally:
            if waiting is not None:
                waiting.set(prev)

    def _taken(self, ring: Any) -> None:
        """An item was taken: count it (recorded into ``ring`` if any) and give its place back."""
        with self._seq_out.get_lock():
            self._seq_out.value += 1
            if ring is not None:
                ring.record(self._seq_out.value)
        if self._free is not None:
            self._free.release()

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get_nowait(self) -> Any:
        return self.get(False)

    def qsize(self) -> int:
        return int(self._seq_in.value - self._seq_out.value)

    def empty(self) -> bool:
        return bool(self._q.empty())

    def full(self) -> bool:
        return self.capacity > 0 and self.qsize() >= self.capacity

    def close(self) -> None:
        self._q.close()

    def join_thread(self) -> None:
        self._q.join_thread()

    def cancel_join_thread(self) -> None:
        self._q.cancel_join_thread()


class MPQueue(MPQueueFace):
    """``multiprocessing.Queue`` monitored from every process that uses it.

    Its occupancy is the number of items put and not yet taken: an insertion is recorded
    after a free place is taken and before the item can be taken, a removal after the item is
    taken and before its place is given back, so it never exceeds ``maxsize``. Sequence numbers
    live in shared memory and are taken with the time under one lock per end, so records from
    different processes still say exactly how many items were in the queue. Pass it to the
    processes that use it (forked or spawned) as ``multiprocessing.Queue`` is passed.
    """

    transport = "process"

    def __init__(
        self, maxsize: int = 0, *, src: str, dst: str, name: str | None = None, ctx: Any = None
    ) -> None:
        if not isinstance(maxsize, int) or maxsize < 0:
            raise ConfigError(f"MPQueue maxsize must be an int >= 0, got {maxsize!r}")
        ctx = ctx or mp.get_context()
        self._q = ctx.Queue()  # unbounded: ``_free`` bounds it, so the records can
        self._free = ctx.BoundedSemaphore(maxsize) if maxsize > 0 else None
        self.name = name or f"{src} -> {dst}"
        self.src, self.dst = src, dst
        self.capacity = maxsize
        self._seq_in = ctx.Value("q", 0)
        self._seq_out = ctx.Value("q", 0)
        self._probes: dict[str, int] = {}
        self._taps: dict[tuple[int, str], RingTap] = {}
        REGISTRY.add_queue(self)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_taps"] = {}  # rings are per process: a spawned child makes its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def attach(self, end: str, probe: int) -> None:
        self._probes[end] = probe

    def detach(self) -> None:
        self._probes.clear()
        self._taps.clear()

    def _tap(self, end: str) -> RingTap | None:
        """This process's tap for ``end`` (made on first use, so children get their own)."""
        probe = self._probes.get(end)
        if probe is None:
            return None
        key = (os.getpid(), end)
        tap = self._taps.get(key)
        if tap is None:
            rec = REGISTRY.recorder()
            if rec is None:
                return None
            tap = rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET, cost=COST_CALL)
            self._taps[key] = tap
        return tap

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self._take_place(native.bound_tracker, block, timeout)
        tap = self._tap("tail")
        with self._seq_in.get_lock():
            self._seq_in.value += 1
            if tap is not None:
                tap.ring.record(self._seq_in.value)
            self._q.put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        item = self._take(native.bound_tracker(), block, timeout)
        tap = self._tap("head")
        self._taken(tap.ring if tap is not None else None)
        return item


__all__ = ["MPQueue", "MPQueueFace"]
