"""``multiprocessing.Pool`` as a program run as it is uses it: its tasks and results as channels.

In: the program's pools and the calls that hand them work (``map``, ``imap``,
``imap_unordered``, ``starmap``, ``apply_async``…) and take results (``next`` on an ``imap``
iterator, ``get``). Out: a pool's task queue is the channel from the stage that hands it work
(the caller's, or, when the work is another ``imap``'s results, that pool's stage) to the
stage of the function it applies (its processes are its workers, ``processes.PoolWorker``); an
``imap`` iterator is the channel from that stage to whoever takes its results (a thread of the
program, a stage of its own; or the pool its results feed, in an ``imap`` chain); a thread
waiting for results is blocked in.
"""

from __future__ import annotations

import contextlib
import functools
import multiprocessing.pool as mpool
import threading
from collections.abc import Callable
from typing import Any

from streamscope.core import forksafe
from streamscope.core.records import State
from streamscope.pipeline.program.auto.channels import ProgramChannel
from streamscope.pipeline.program.auto.claims import claim_stage
from streamscope.pipeline.program.auto.mpcounts import Counts
from streamscope.pipeline.program.auto.mpqueue import Locked, counts_of, task_items
from streamscope.pipeline.program.auto.naming import Who, who_started
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.processes import applied
from streamscope.pipeline.program.auto.queues import AutoSimpleQueue, StandardSimpleQueue
from streamscope.pipeline.program.auto.stages import (
    enter,
    internal,
    leave,
    on_behalf_of,
    stage,
    thread_state,
    thread_tracker,
)
from streamscope.pipeline.program.auto.waits import waiting

#: The function and pool of the ``imap`` call the calling thread is in (``imap`` makes its
#: iterator before it returns it); process-wide, per thread, as calls are.
_calling = threading.local()


def _pool_stage(pool: Any, func: Any) -> tuple[Who, str] | None:
    """The stage a pool's processes are when they apply ``func``: (what they work as, the id
    of the pool's task queue); None for a pool the standard library made for itself."""
    counts = counts_of(getattr(pool, "_inqueue", None))
    if counts is None:
        return None
    return applied(func), counts.id


# -- the task queue -----------------------------------------------------------------------


def _setup_queues(setup: Callable[[Any], None]) -> Callable[[Any], None]:
    """``Pool._setup_queues``: a program's pool's task queue recorded (its puts go straight to
    its pipe: those are counted as it sends them)."""

    @functools.wraps(setup)
    def setup_queues(self: Any) -> None:
        setup(self)
        inqueue = self._inqueue
        if internal(type(self).__module__) and type(self) is not mpool.Pool:
            return
        if not isinstance(getattr(inqueue, "_rlock", None), Locked) and inqueue._wlock is not None:
            counts = Counts(0)
            inqueue._wlock = Locked(inqueue._wlock, counts, "tail")
            inqueue._rlock = Locked(inqueue._rlock, counts, "head")
        recorded = counts_of(inqueue)
        if recorded is not None:
            recorded.mark_tasks()
            send = inqueue._writer.send

            def quick_put(obj: Any) -> None:
                if task_items(obj):
                    recorded.inserted()
                send(obj)

            self._quick_put = quick_put

    return setup_queues


class _PoolTasks(AutoSimpleQueue):
    """A ``ThreadPool``'s task queue (``multiprocessing.pool.ThreadPool``, ``multiprocessing.dummy
    .Pool``), recorded: its worker threads, which run ``multiprocessing.pool``'s loop, work as
    the function of each task they take (``pool.map(parse, …)``: ``parse``), as a process
    pool's do."""

    def _items(self, item: Any) -> int:
        return task_items(item)  # a worker told to end: the pool's own

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if not block:  # the pool ending (``_help_stuff_finish``): what it drains is no stage's
            task = StandardSimpleQueue.get(self, False)
            if task_items(task):
                with self._ss_lock:
                    self._ss.removed()
            return task
        task = super().get(block, timeout)
        if isinstance(task, tuple) and len(task) == 5:
            # the program's function, through map's helpers or a library's wrapper (joblib's
            # batch of calls), as an executor's call is found
            who = who_started(task[2], tuple(task[3]), dict(task[4]), None, True)
            if who != getattr(thread_state, "who", None):
                leave()
                tracker = enter(who, self._ss.id)
                with self._ss_lock:  # the queue's head known now: the channel named
                    self._ss.seen("head", tracker, stage())
        return task


def _thread_setup_queues(setup: Callable[[Any], None]) -> Callable[[Any], None]:
    """``ThreadPool._setup_queues``: a program's thread pool's task queue recorded."""

    @functools.wraps(setup)
    def setup_queues(self: Any) -> None:
        setup(self)
        if internal(type(self).__module__) and type(self) is not mpool.ThreadPool:
            return
        self._inqueue = _PoolTasks()
        self._quick_put = self._inqueue.put

    return setup_queues


def _handing(method: Callable[..., Any]) -> Callable[..., Any]:
    """A call that hands the pool work (``map``, ``imap``, ``apply_async``…): its task queue's
    tail is the caller's stage, or, for an ``imap`` chain, the stage whose results it takes."""

    @functools.wraps(method)
    def hand(self: Any, func: Any, iterable: Any = (), *args: Any, **kwargs: Any) -> Any:
        counts = counts_of(getattr(self, "_inqueue", None))
        feeds = _pool_stage(self, func)
        tasks = getattr(self, "_inqueue", None)
        if isinstance(tasks, _PoolTasks) and tasks._ss.name is None:  # a thread pool's
            thread_tracker("out", tasks._ss.id)
            with tasks._ss_lock:
                tasks._ss.saw("tail", stage())
        if counts is not None and not counts.probe(0):
            ss = getattr(iterable, "_ss", None)
            if isinstance(ss, ProgramChannel) and ss.src is not None:
                counts.saw("tail", ss.src)  # an imap chain: the earlier pool's stage feeds it
            else:
                thread_tracker("out", counts.id)
                counts.saw("tail", stage())
        if isinstance(getattr(iterable, "_ss", None), ProgramChannel) and feeds is not None:
            iterable._ss_feeds = feeds  # its results are taken by this pool's task handler
        _calling.func, _calling.pool = func, self
        try:
            return method(self, func, iterable, *args, **kwargs)
        finally:
            _calling.func = _calling.pool = None

    return hand


# -- the results ----------------------------------------------------------------------------


def _iterator_init(init: Callable[..., None]) -> Callable[..., None]:
    """``IMapIterator.__init__``: the iterator of a program's pool is a channel from the pool's
    stage."""

    @functools.wraps(init)
    def iterator_init(self: Any, pool: Any) -> None:
        init(self, pool)
        func = getattr(_calling, "func", None)
        where = _pool_stage(pool, func) if func is not None else None
        if where is None:
            return
        who, pool_id = where
        ss = self._ss = ProgramChannel(0, "process")
        ss.saw("tail", claim_stage(who, "in", pool_id))

    return iterator_init


def _result_set(set_: Callable[..., None]) -> Callable[..., None]:
    """``_set``: a result came back: an insertion (counted before it can be taken)."""

    @functools.wraps(set_)
    def result_set(self: Any, i: int, obj: Any) -> None:
        ss = getattr(self, "_ss", None)
        if ss is not None:
            with _lock_of(self):
                ss.inserted()
        set_(self, i, obj)

    return result_set


def _lock_of(it: Any) -> threading.Lock:
    lock: threading.Lock | None = it.__dict__.get("_ss_lock")
    if lock is None:
        lock = it.__dict__.setdefault("_ss_lock", forksafe.lock())
    return lock


def _result_next(next_: Callable[..., Any]) -> Callable[..., Any]:
    """``next``: a result taken (a removal), by a thread of the program (its stage; blocked in
    while it waits) or by the task handler of the pool it feeds (that pool's stage)."""

    @functools.wraps(next_)
    def result_next(self: Any, timeout: float | None = None) -> Any:
        ss = getattr(self, "_ss", None)
        if ss is None:
            # a thread pool's results (no channel of their own): the caller waits for the next
            # blocked in all the same (it read busy 99 % while its pool's threads worked)
            with waiting(State.BLOCKED_IN) if not self._items else contextlib.nullcontext():
                return next_(self, timeout)
        tracker = thread_tracker("in", ss.id)
        taker = stage()
        feeds = getattr(self, "_ss_feeds", None)
        if taker is None and feeds is not None:  # the task handler of the pool it feeds
            taker = claim_stage(feeds[0], "in", feeds[1])
        if ss.name is None:
            ss.saw("head", taker)
        wait = tracker is not None and not self._items
        with waiting(State.BLOCKED_IN) if wait else contextlib.nullcontext():
            item = next_(self, timeout)
        with _lock_of(self):
            ss.removed()
        if tracker is not None:
            tracker.took()
        return item

    return result_next


def _apply_init(init: Callable[..., None]) -> Callable[..., None]:
    """``ApplyResult.__init__`` (and ``MapResult``'s): a result of a program's pool keeps the
    stage of the function it is a result of, for its callbacks."""

    @functools.wraps(init)
    def apply_init(self: Any, pool: Any, *args: Any, **kwargs: Any) -> None:
        init(self, pool, *args, **kwargs)
        func = getattr(_calling, "func", None)
        if func is not None and (self._callback is not None or self._error_callback is not None):
            self._ss_by = _pool_stage(pool, func)

    return apply_init


def _apply_set(set_: Callable[..., None]) -> Callable[..., None]:
    """``ApplyResult._set`` (and ``MapResult``'s): the pool's result handler runs the
    program's callbacks on behalf of the stage of the pool's function (``results.put`` as a
    callback: that stage puts into ``results``)."""

    @functools.wraps(set_)
    def apply_set(self: Any, *args: Any) -> None:
        by = getattr(self, "_ss_by", None)
        if by is None:
            set_(self, *args)
            return
        with on_behalf_of(claim_stage(by[0], "in", by[1])):
            set_(self, *args)

    return apply_set


def _blocked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``ApplyResult.get``/``wait``: the caller blocked in until the result is ready."""

    @functools.wraps(fn)
    def call(self: Any, timeout: float | None = None) -> Any:
        if self.ready():
            return fn(self, timeout)
        with waiting(State.BLOCKED_IN):
            return fn(self, timeout)

    return call


#: The pools' methods, recorded while installed; process-wide, as the patched module is.
PATCHES = Patches({
    (mpool.Pool, "_setup_queues"): _setup_queues,
    (mpool.ThreadPool, "_setup_queues"): _thread_setup_queues,
    **{(mpool.Pool, m): _handing for m in (
        "map", "map_async", "starmap", "starmap_async", "imap", "imap_unordered", "apply_async",
    )},
    (mpool.IMapIterator, "__init__"): _iterator_init,
    (mpool.IMapIterator, "_set"): _result_set,
    (mpool.IMapUnorderedIterator, "_set"): _result_set,
    (mpool.IMapIterator, "next"): _result_next,
    (mpool.IMapIterator, "__next__"): _result_next,
    (mpool.ApplyResult, "__init__"): _apply_init,
    (mpool.MapResult, "__init__"): _apply_init,
    (mpool.ApplyResult, "_set"): _apply_set,
    (mpool.MapResult, "_set"): _apply_set,
    (mpool.ApplyResult, "get"): _blocked,
    (mpool.ApplyResult, "wait"): _blocked,
})  # fmt: skip


__all__ = ["PATCHES"]
