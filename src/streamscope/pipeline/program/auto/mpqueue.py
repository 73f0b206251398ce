"""``multiprocessing`` queues as a program run as it is makes them, recorded.

In: the program's puts and gets, from whichever of its processes, on the standard classes
(``multiprocessing.queues.Queue``, ``JoinableQueue``, ``SimpleQueue``: made through a context,
``multiprocessing.Queue()``, or directly, as pypeln makes them; the program's and libraries'
subclasses included). Out: the same items, waits and errors, one tail record per insertion and
one head record per removal, numbered in shared memory so that records from different processes
still say exactly how many items were in the queue; the stages at its ends found in whichever
processes put and get.

The standard classes keep their identity (their instances pickle by reference to them, as
``multiprocessing`` does when it starts a process); ``install`` replaces their methods. A
recorded queue's counts ride in what its pickled state already holds, so a process that has not
installed anything yet (a spawned child unpickling its arguments) reads it unchanged: a
``Queue``'s semaphore of free places is wrapped (``Places``): a put takes a place before an
item goes in (an insertion), a get gives it back after an item came out (a removal); a
``SimpleQueue``'s locks are wrapped likewise (``Locked``). Queues the standard library makes for
itself (a ``Pool``'s, an executor's) are left unrecorded.
"""

from __future__ import annotations

import multiprocessing.queues
import os
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
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
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.stages import (
    internal,
    made_internally,
    stage,
    thread_tracker,
)
from streamscope.pipeline.program.auto.waits import waiting
from streamscope.pipeline.program.registry import REGISTRY
from streamscope.probes.taps import host_clock

_MPQ = multiprocessing.queues


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
        """A ``Pool``'s task queue (``mark_tasks``)."""
        return self.block.get(ROLE) == TASKS

    def mark_tasks(self) -> None:
        """The queue is a ``Pool``'s task queue: its end markers are not counted as items
        (``task_items``), so a removal is counted once a worker has read its task."""
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


class Places:
    """A ``Queue``'s semaphore of free places, as ``multiprocessing.queues`` uses it, counting:
    a put's ``acquire`` (the putting thread blocked out while it waits) is an insertion, a
    get's ``release`` a removal."""

    def __init__(self, sem: Any, counts: Counts) -> None:
        self.sem = sem
        self.counts = counts

    @property
    def _semlock(self) -> Any:
        return self.sem._semlock

    def acquire(self, block: bool = True, timeout: float | None = None) -> bool:
        if not self.sem.acquire(False):
            if not block:
                return False
            tracker = native.bound_tracker()
            prev = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
            try:
                if not self.sem.acquire(True, timeout):
                    return False
            finally:
                if tracker is not None:
                    tracker.set(prev)
        self.counts.inserted()
        return True

    def release(self) -> None:
        self.counts.removed()
        self.sem.release()


class Locked:
    """A ``SimpleQueue``'s write (``end`` tail) or read (``head``) lock, counting: an item is
    inserted as its writer takes the lock, removed as its reader lets it go."""

    def __init__(self, lock: Any, counts: Counts, end: str) -> None:
        self.lock, self.counts, self.end = lock, counts, end

    def __enter__(self) -> bool:
        got: bool = self.lock.__enter__()
        if self.end == "tail" and not getattr(_uncounted, "on", False):
            self.counts.inserted()
        return got

    def __exit__(self, *exc: object) -> None:
        if self.end == "head" and exc[0] is None and not self.counts.tasks:
            self.counts.removed()  # (a pool's task: counted once read whole, ``_simple_get``)
        self.lock.__exit__(*exc)

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return bool(self.lock.acquire(*args, **kwargs))

    def release(self) -> None:
        self.lock.release()


def task_items(task: Any) -> int:
    """How many items a ``Pool``'s task is (one call, or one chunk of a ``map``'s items: the
    channel's unit): one, or none for the end marker each worker is told to end by (counted,
    a pool of 2 workers mapping 6 items had 8)."""
    return 0 if task is None else 1


#: Set while the calling thread puts what is no item of the program's (``_simple_put``): its
#: write lock does not count it. Per thread of the process, as puts are.
_uncounted = threading.local()


def counts_of(q: Any) -> Counts | None:
    """The counts of a recorded queue (None: a queue the standard library made for itself, or
    one made before ``install``)."""
    sem = getattr(q, "_sem", None)
    if isinstance(sem, Places):
        return sem.counts
    lock = getattr(q, "_rlock", None)
    return lock.counts if isinstance(lock, Locked) else None


#: Where a process executor keeps its call queue (a ``Queue`` subclass) and makes its result
#: queue: an executor the program made (or joblib made for it: loky's) has both recorded
#: (``auto.executors``).
EXECUTOR = "concurrent.futures.process"
#: loky's executor and queue classes (joblib's copy, and loky's own), whose queues are the
#: program's when the program (or joblib for it) made the executor.
LOKY = ("joblib.externals.loky", "loky")
_LOKY_QUEUES = tuple(f"{m}.{part}" for m in LOKY for part in ("process_executor", "backend.queues"))
#: What the code making an executor's queues goes through: its own modules.
_THROUGH = (EXECUTOR, *(f"{m}.{part}" for m in LOKY for part in (
    "process_executor", "backend.queues", "reusable_executor", "backend.context",
)))  # fmt: skip


def _made_internally(q: Any) -> bool:
    """Whether ``q`` is the standard library's or streamscope's own: its class is theirs, or
    it is one of the standard classes made by their code (``stages.made_internally``); a
    process executor's queues are the program's when the program made the executor."""
    kind = type(q)
    if kind not in (_MPQ.Queue, _MPQ.JoinableQueue, _MPQ.SimpleQueue) and kind.__module__ not in (
        EXECUTOR,
        *_LOKY_QUEUES,
    ):
        return internal(kind.__module__)
    return made_internally(3, _THROUGH)


def _capacity(maxsize: int) -> int:
    return maxsize if maxsize > 0 else 0


# -- the standard methods, recorded -------------------------------------------------------


def _queue_init(init: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, maxsize: int = 0, *, ctx: Any) -> None:  # noqa: N807
        init(self, maxsize, ctx=ctx)
        if not isinstance(self._sem, Places) and not _made_internally(self):
            self._sem = Places(self._sem, Counts(_capacity(maxsize)))

    return __init__


def _put(counts: Counts, call: Callable[..., None], *args: Any) -> None:
    """A recorded queue's put, by the calling worker (the count is the places' or locks')."""
    tracker = counts.enter("tail")
    call(*args)
    if tracker is not None:
        tracker.gave()


def _take(counts: Counts, waits: bool, call: Callable[..., Any], *args: Any) -> Any:
    """A recorded queue's get, by the calling worker: blocked in while it ``waits`` (nothing is
    in the pipe yet)."""
    tracker = counts.enter("head")
    with waiting(State.BLOCKED_IN) if tracker is not None and waits else nullcontext():
        item = call(*args)
    if tracker is not None:
        tracker.took()
    return item


def _queue_put(put: Callable[..., None]) -> Callable[..., None]:
    def put_(self: Any, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        places = self._sem
        if not isinstance(places, Places):
            put(self, obj, block, timeout)
        else:
            _put(places.counts, put, self, obj, block, timeout)

    return put_


def _queue_get(get: Callable[..., Any]) -> Callable[..., Any]:
    def get_(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        places = self._sem
        if not isinstance(places, Places):
            return get(self, block, timeout)
        return _take(places.counts, block and not self._poll(), get, self, block, timeout)

    return get_


def _simple_init(init: Callable[..., None]) -> Callable[..., None]:
    def __init__(self: Any, *, ctx: Any) -> None:  # noqa: N807
        init(self, ctx=ctx)
        if self._wlock is not None and not _made_internally(self):
            counts = Counts(0)
            self._wlock = Locked(self._wlock, counts, "tail")
            self._rlock = Locked(self._rlock, counts, "head")

    return __init__


def _simple_put(put: Callable[..., None]) -> Callable[..., None]:
    def put_(self: Any, obj: Any) -> None:
        lock = self._wlock
        if not isinstance(lock, Locked):
            put(self, obj)
        elif type(obj) is int and lock.counts.results:
            # A process executor's worker telling its manager it exited (its pid): the manager
            # may join it without reading that, and it is no result of the program's.
            _uncounted.on = True
            try:
                put(self, obj)
            finally:
                _uncounted.on = False
        else:
            _put(lock.counts, put, self, obj)

    return put_


def _simple_get(get: Callable[..., Any]) -> Callable[..., Any]:
    def get_(self: Any) -> Any:
        lock = self._rlock
        if not isinstance(lock, Locked):
            return get(self)
        item = _take(lock.counts, not self._poll(), get, self)
        if lock.counts.tasks and task_items(item):
            lock.counts.removed()
        return item

    return get_


def _joinable_join(join: Callable[[Any], None]) -> Callable[[Any], None]:
    def join_(self: Any) -> None:
        """``JoinableQueue.join``: the calling worker waits for what it put to be worked off
        downstream, blocked out, not busy."""
        with waiting(State.BLOCKED_OUT):
            join(self)

    return join_


def loky_queues(module: Any) -> Patches:
    """loky's ``SimpleQueue`` (an executor's result queue) puts with its own reducers, around
    the standard write lock (which counts): its puts recorded at the calling worker's end."""
    return Patches({(module.SimpleQueue, "put"): _simple_put})


#: The standard methods, recorded while installed; process-wide, as the patched classes are.
PATCHES = Patches({
    (_MPQ.Queue, "__init__"): _queue_init,
    (_MPQ.Queue, "put"): _queue_put,
    (_MPQ.Queue, "get"): _queue_get,
    (_MPQ.JoinableQueue, "put"): _queue_put,
    (_MPQ.JoinableQueue, "join"): _joinable_join,
    (_MPQ.SimpleQueue, "__init__"): _simple_init,
    (_MPQ.SimpleQueue, "put"): _simple_put,
    (_MPQ.SimpleQueue, "get"): _simple_get,
})  # fmt: skip


__all__ = [
    "EXECUTOR", "LOKY", "PATCHES", "Counts", "Locked", "Places", "counts_of", "loky_queues",
    "task_items",
]  # fmt: skip
