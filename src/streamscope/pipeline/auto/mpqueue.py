"""``multiprocessing.Queue`` and ``JoinableQueue`` as a program run as it is makes them, recorded.

In: the program's puts and gets, from whichever of its processes. Out: the same items, counted
as the drop-in's ``MPQueue`` counts them (in shared memory, one lock per end), with the stages
at its ends found in whichever processes put and get.
"""

from __future__ import annotations

import os
from typing import Any

from streamscope.pipeline.auto.channels import declare_channel, end_ring
from streamscope.pipeline.auto.stages import stage, thread_tracker
from streamscope.pipeline.mpqueue import MPQueueFace
from streamscope.pipeline.registry import REGISTRY

#: Longest stage name a ``multiprocessing`` queue shares between processes (bytes, UTF-8).
_NAME_BYTES = 160


class AutoMPQueue(MPQueueFace):
    """``multiprocessing.Queue`` (or ``JoinableQueue``) as the program made it, recorded from
    every process that uses it, as the drop-in's ``MPQueue`` counts: an insertion after a free
    place is taken and before the item can be taken, a removal after the item is taken and
    before its place is given back, numbered in shared memory under one lock per end. The
    stages at its ends are found in whichever processes put and get, and kept in shared memory
    too; the process that learns the second declares the channel."""

    def __init__(self, ctx: Any, maxsize: int = 0, joinable: bool = False) -> None:
        self._q = ctx.JoinableQueue() if joinable else ctx.Queue()
        self._free = ctx.BoundedSemaphore(maxsize) if maxsize > 0 else None
        self.capacity = maxsize if maxsize > 0 else 0
        self._seq_in = ctx.Value("q", 0)
        self._seq_out = ctx.Value("q", 0)
        self._ends = ctx.Array("c", 2 * _NAME_BYTES, lock=False)
        self._probes = ctx.Array("q", 3, lock=False)  # declared?, tail probe, head probe
        self._rings: dict[tuple[int, str], Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_rings"] = {}  # rings are per process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def _saw(self, end: str) -> None:
        """Under the seq lock of ``end``: note this process's stage at ``end``, and declare
        the channel if both ends are known now."""
        who = stage()
        if who is None:
            return
        mine = who.encode()[: _NAME_BYTES - 1]
        with self._seq_in.get_lock(), self._seq_out.get_lock():
            raw = bytes(self._ends[:])
            src, dst = (raw[i * _NAME_BYTES : (i + 1) * _NAME_BYTES].rstrip(b"\0") for i in (0, 1))
            i = 0 if end == "tail" else 1
            if not (src, dst)[i]:
                self._ends[i * _NAME_BYTES : i * _NAME_BYTES + len(mine)] = mine
                src, dst = (mine, dst) if i == 0 else (src, mine)
            if src and dst and not self._probes[0] and REGISTRY.active():
                _, tail, head = declare_channel(
                    src.decode(), dst.decode(), self.capacity, "process"
                )
                self._probes[1], self._probes[2], self._probes[0] = tail, head, 1

    def _ring(self, end: str) -> Any:
        """This process's ring for ``end`` (made on first use; None: unwatched, or no session)."""
        key = (os.getpid(), end)
        ring = self._rings.get(key)
        if ring is None and self._probes[0] and REGISTRY.active():
            ring = self._rings[key] = end_ring(self._probes[1 if end == "tail" else 2], end)
        return ring

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        if not self._probes[0]:
            self._saw("tail")
        self._take_place(thread_tracker, block, timeout)
        tracker = thread_tracker()
        ring = self._ring("tail")
        with self._seq_in.get_lock():
            self._seq_in.value += 1
            if ring is not None:
                ring.record(self._seq_in.value)
            self._q.put(obj)
        if tracker is not None:
            tracker.heartbeat()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if not self._probes[0]:
            self._saw("head")
        tracker = thread_tracker()
        item = self._take(tracker, block, timeout)
        self._taken(self._ring("head"))
        if tracker is not None:
            tracker.heartbeat()
        return item

    def task_done(self) -> None:
        self._q.task_done()

    def join(self) -> None:
        self._q.join()


__all__ = ["AutoMPQueue"]
