"""A recorded ``multiprocessing`` queue's counts: shared between the processes that use it.

In: the insertions and removals a queue's wrappers see (``mpqueue``, ``managed``, ``pipes``),
in whichever of the program's processes. Out: their sequence numbers in the queue's shared
block (``mpblock``), one record per insertion and removal in the calling process's ring, the
stages seen at each end, and the channel declared once both are known.
"""

from __future__ import annotations

import os
from typing import Any

from streamscope.core import native
from streamscope.pipeline.program.auto.channels import declare_channel, end_ring
from streamscope.pipeline.program.auto.claims import new_queue_id
from streamscope.pipeline.program.auto.mpblock import (
    EARLY,
    EARLY_AT,
    EARLY_OUT_AT,
    ENDS,
    NAME_BYTES,
    PROBES,
    RESULTS,
    ROLE,
    SEQ_IN,
    SEQ_OUT,
    TASKS,
    Block,
)
from streamscope.pipeline.program.auto.stages import stage, thread_tracker
from streamscope.pipeline.program.registry import REGISTRY
from streamscope.probes.taps import host_clock


class Counts:
    """A recorded ``multiprocessing`` queue's shared counts and ends: sequence numbers of its
    insertions and removals, the stages seen at each end and the channel's probes, in a shared
    block (``Block``) under its two locks; this process's rings. Passed to other processes
    with the queue."""

    def __init__(self, capacity: int, key: str | None = None) -> None:
        """``key``: a queue's id its processes share without passing it (a manager's queue:
        ``auto.managed``); else a new one."""
        self.capacity = capacity
        self.id = key or new_queue_id()
        self.block = Block.shared(key) if key else Block.made(self.id)
        self.rings: dict[tuple[int, str], Any] = {}

    @property
    def lock_in(self) -> Any:
        return self.block.lock(0)

    @property
    def lock_out(self) -> Any:
        return self.block.lock(1)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["rings"] = {}  # rings are per process
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    @property
    def seq_in(self) -> int:
        return self.block.get(SEQ_IN)

    @property
    def seq_out(self) -> int:
        return self.block.get(SEQ_OUT)

    @property
    def results(self) -> bool:
        """A process executor's result queue (``mark_results``)."""
        return self.block.get(ROLE) == RESULTS

    def mark_results(self) -> None:
        """The queue is a process executor's result queue: its workers' exit notices (their
        pids) are not counted as items (``_simple_put``)."""
        self.block.set(ROLE, RESULTS)

    @property
    def tasks(self) -> bool:
        """A pool's or an executor's task queue (``mark_tasks``)."""
        return self.block.get(ROLE) == TASKS

    def mark_tasks(self) -> None:
        """The queue is a ``Pool``'s task queue or a process executor's call queue: its end
        markers are not counted as items (``task_items``), so a removal is counted once a
        worker has read its task."""
        self.block.set(ROLE, TASKS)

    def probe(self, i: int) -> int:
        """The channel's probes: 0 declared?, 1 tail, 2 head."""
        return self.block.get(PROBES + 8 * i)

    def inserted(self) -> None:
        self._count("tail", self.lock_in, SEQ_IN, EARLY_AT)

    def removed(self) -> None:
        self._count("head", self.lock_out, SEQ_OUT, EARLY_OUT_AT)

    def _count(self, end: str, lock: Any, seq_at: int, early_at: int) -> None:
        """One more item in (``tail``) or out (``head``): numbered, and recorded; before the
        channel is declared, its time kept (the latest ``EARLY``) to be recorded when it is."""
        ring = self.ring(end)
        with lock:
            seq = self.block.add(seq_at)
            if ring is not None:
                ring.record(seq)
            elif not self.probe(0) and REGISTRY.active():
                self.block.set(early_at + 8 * (seq % EARLY), host_clock().now())

    def ring(self, end: str) -> Any:
        """This process's ring for ``end`` (made on first use; None: unwatched, or no session)."""
        key = (os.getpid(), end)
        ring = self.rings.get(key)
        if ring is None and self.probe(0) and REGISTRY.active():
            ring = self.rings[key] = end_ring(self.probe(1 if end == "tail" else 2), end)
        return ring

    def saw(self, end: str, who: str | None) -> None:
        """The calling worker's stage ``who`` is at ``end``: note it in shared memory, and
        declare the channel if both ends are known now."""
        if who is None:
            return
        mine = who.encode()[: NAME_BYTES - 1]
        mem = self.block.mem
        with self.lock_in, self.lock_out:
            raw = bytes(mem[ENDS : ENDS + 2 * NAME_BYTES])
            src, dst = (raw[i * NAME_BYTES : (i + 1) * NAME_BYTES].rstrip(b"\0") for i in (0, 1))
            i = 0 if end == "tail" else 1
            if not (src, dst)[i]:
                at = ENDS + i * NAME_BYTES
                mem[at : at + len(mine)] = mine
                src, dst = (mine, dst) if i == 0 else (src, mine)
            if src and dst and not self.probe(0) and REGISTRY.active():
                _, tail, head = declare_channel(
                    self.id, src.decode(), dst.decode(), self.capacity, "process"
                )
                self.block.set(PROBES + 8, tail)
                self.block.set(PROBES + 16, head)
                self.block.set(PROBES, 1)
                self._early()

    def _early(self) -> None:
        """What went in and out before both ends were known, recorded as the channel is
        declared: each of the latest ``EARLY`` insertions and removals at its own time (the ones
        before counted with the first of them), so that a queue filled before its reader came
        holds its items while they waited, and items a pool's workers took before they knew
        their function left it when they did (stamped at the declaration instead, they had
        waited there in their latency and not in its occupancy: Little's law read 0.5 on a
        plain ``Pool.map``)."""
        for end, seq_at, early_at in (("tail", SEQ_IN, EARLY_AT), ("head", SEQ_OUT, EARLY_OUT_AT)):
            seq = self.block.get(seq_at)
            ring = self.ring(end) if seq else None
            if ring is None:
                continue
            for n in range(max(seq - EARLY + 1, 1), seq + 1):
                ticks = self.block.get(early_at + 8 * (n % EARLY))
                if ticks > 0:  # (0: while no session was active; the next one counts it)
                    ring.record_at(ticks, n)
            if self.block.get(early_at + 8 * (seq % EARLY)) <= 0:
                ring.record(seq)

    def enter(self, end: str) -> native.StateTracker | None:
        """The calling worker puts (``tail``) or gets (``head``): its tracker, its stage
        claimed at its first queue operation, the channel's ends noted until both are known."""
        tracker = thread_tracker("out" if end == "tail" else "in", self.id)
        if not self.probe(0):
            self.saw(end, stage())
        return tracker


__all__ = ["Counts"]
