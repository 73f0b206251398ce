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
itself (a ``Pool``'s, an executor's) are left unrecorded. The counts themselves, shared by the
processes that use a queue, are ``mpcounts``'.
"""

from __future__ import annotations

import multiprocessing.queues
import threading
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.pipeline.program.auto.mpcounts import Counts
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.stages import (
    internal,
    made_internally,
)
from streamscope.pipeline.program.auto.waits import waiting

_MPQ = multiprocessing.queues


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
        if not getattr(_uncounted, "on", False):
            self.counts.inserted()
        return True

    def release(self) -> None:
        if not self.counts.tasks:
            self.counts.removed()  # (an executor's call: counted once read whole, ``_queue_get``)
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
    """How many items a pool's or a process executor's task is (one call, or one chunk of a
    ``map``'s items: the channel's unit): one, or none for the end marker each worker is told
    to end by (counted, a pool of 2 workers mapping 6 items had 8, an executor's 12 calls
    14)."""
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
        elif obj is None and places.counts.tasks:  # a worker told to end: no call
            _uncounted.on = True
            try:
                put(self, obj, block, timeout)
            finally:
                _uncounted.on = False
        else:
            _put(places.counts, put, self, obj, block, timeout)

    return put_


def _queue_get(get: Callable[..., Any]) -> Callable[..., Any]:
    def get_(self: Any, block: bool = True, timeout: float | None = None) -> Any:
        places = self._sem
        if not isinstance(places, Places):
            return get(self, block, timeout)
        item = _take(places.counts, block and not self._poll(), get, self, block, timeout)
        if places.counts.tasks and task_items(item):
            places.counts.removed()
        return item

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
    "EXECUTOR", "LOKY", "PATCHES", "Locked", "Places", "counts_of", "loky_queues",
    "task_items",
]  # fmt: skip
