"""Unmodified programs: the standard queues instrumented, threads and processes as stages.

In: a program that uses ``queue.Queue``, ``queue.SimpleQueue``, ``multiprocessing.Queue`` or
``JoinableQueue`` between ``threading.Thread``s and ``multiprocessing.Process``es, run while
``install()`` is in force inside a drop-in session (``runtime.instrument.monitor``). Out: the
drop-in's records. Each thread or process is a worker of the stage named after its target (the
function, or the class of a ``Thread``/``Process`` subclass; the program's main thread is
``main``), declared the first time it puts or gets. Each queue the program makes is a channel
named from the first stage that put into it and the first that got from it, ``src -> dst``,
declared once both are known; its sequence numbers count from its creation, so its occupancy is
exact from the first records on. Queues and threads that streamscope or the standard library
make for themselves are left alone, and so is every queue's behaviour: the instrumented ones are
subclasses (or, for ``multiprocessing``, the drop-in's ``MPQueue`` way of counting) with the
same methods, waits and errors.
"""

from __future__ import annotations

import asyncio
import asyncio.queues
import contextlib
import functools
import itertools
import multiprocessing as mp
import multiprocessing.context
import multiprocessing.process
import os
import queue
import random
import sys
import threading
import weakref
from collections.abc import Callable
from time import monotonic
from typing import Any

from streamscope.core import native
from streamscope.core.records import Kind, State
from streamscope.core.rings import declare, next_probe_ids
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, Topology
from streamscope.pipeline.dropin import REGISTRY, MPQueueFace, taps_for
from streamscope.probes.taps import COST_CALL

#: The stage of a program's main thread.
MAIN = "main"
#: Modules whose queues and threads are their own business, not the program's stages.
_OWN = (
    "streamscope",
    "multiprocessing",
    "logging",
    "asyncio",
    "concurrent.futures.process",
    "queue",
    "threading",
    "selectors",
    "subprocess",
)
#: Longest stage name a ``multiprocessing`` queue shares between processes (bytes, UTF-8).
_NAME_BYTES = 160

_local = threading.local()
#: Channels of this process, so that ending the session stops their recording.
_channels: weakref.WeakSet[_Channel] = weakref.WeakSet()
_names: dict[str, int] = {}
_names_lock = threading.Lock()
#: The stage of this process's main thread (a child process: its target's).
_main_stage = [MAIN]


def _internal(module: str | None) -> bool:
    return not module or any(module == m or module.startswith(m + ".") for m in _OWN)


def _caller_internal(depth: int = 2) -> bool:
    """Whether the code that made a queue is streamscope's or the standard library's own."""
    with contextlib.suppress(ValueError):
        return _internal(sys._getframe(depth).f_globals.get("__name__"))
    return False


def callable_name(fn: Any) -> str:
    """A stage name for a thread's or process's target: its qualified name, without
    ``<locals>``; a ``functools.partial``'s function's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None)
    if not isinstance(name, str):
        name = type(fn).__qualname__
    return name.replace("<locals>.", "")


def _thread_stage(t: threading.Thread) -> str | None:
    """The stage a thread works for: its target's name, its class's (a subclass with its own
    ``run``), or None for the standard library's and streamscope's own threads."""
    target = getattr(t, "_target", None)
    if target is None:
        cls = type(t)
        if cls is threading.Thread or _internal(cls.__module__):
            return None
        return callable_name(cls)
    module = getattr(target, "__module__", None)
    if module == "concurrent.futures.thread":  # an executor's worker: the executor's name
        return t.name.rpartition("_")[0] or t.name
    return None if _internal(module) else callable_name(target)


def stage() -> str | None:
    """The stage of the calling thread (None: not one of the program's)."""
    name: str | None = getattr(_local, "stage", None)
    if name is None and threading.current_thread() is threading.main_thread():
        return _main_stage[0]
    return name


def _tracker() -> native.StateTracker | None:
    """The calling thread's state tracker, made (and its worker declared) on its first put
    or get: from then on it is busy but while it waits on a queue."""
    tracker = native.bound_tracker()
    if tracker is not None or getattr(_local, "entered", False):
        return tracker
    _local.entered = True
    name = stage()
    if name is None or not REGISTRY.active():
        return None
    REGISTRY.add_stage(name)
    tracker = REGISTRY.tracker(name)
    if tracker is not None:
        native.bind_tracker(tracker)
        tracker.set(State.BUSY)
    return tracker


def _leave() -> None:
    """The calling thread's work is over: its stage's worker is idle from now on."""
    tracker = native.bound_tracker()
    if tracker is not None and getattr(_local, "entered", False):
        tracker.set(State.IDLE)
        native.bind_tracker(None)
    _local.entered = False


def _unique(name: str) -> str:
    """``name``, or ``name #2``, ``#3``… when queues between the same stages exist already."""
    with _names_lock:
        n = _names.get(name, 0) + 1
        _names[name] = n
    return name if n == 1 else f"{name} #{n}"


def _declare(src: str, dst: str, capacity: int, transport: str) -> tuple[str, int, int]:
    """Declare a channel found in this process: (its name, tail probe, head probe; 0 where no
    query watches that end)."""
    assert REGISTRY.directory is not None
    name = _unique(f"{src} -> {dst}")
    info = ChannelInfo(name, src, dst, capacity, transport)
    kinds = [k for k in ("tail", "head") if k in taps_for(REGISTRY.watches, channel=info)]
    ids = {"tail": 0, "head": 0}
    probes: tuple[ProbeInfo, ...] = ()
    if kinds:
        first = next_probe_ids(REGISTRY.directory, len(kinds))
        probes = tuple(ProbeInfo(first + i, k, name) for i, k in enumerate(kinds))
        ids.update({p.kind: p.id for p in probes})
    REGISTRY.add_stage(src)
    REGISTRY.add_stage(dst)
    declare(REGISTRY.directory, Topology("", channels=(info,), probes=probes))
    return name, ids["tail"], ids["head"]


def _ring(probe: int, end: str) -> Any:
    rec = REGISTRY.recorder()
    if rec is None or not probe:
        return None
    return rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET, cost=COST_CALL).ring


class _Channel:
    """One thread queue's names, counts and rings (used under the queue's own lock)."""

    __slots__ = (
        "__weakref__", "capacity", "dst", "head", "n_in", "n_out", "name", "src", "tail",
        "transport",
    )  # fmt: skip

    def __init__(self, capacity: int, transport: str = "thread") -> None:
        self.capacity = capacity
        self.transport = transport
        self.src: str | None = None
        self.dst: str | None = None
        self.name: str | None = None
        self.n_in = self.n_out = 0
        self.tail: Any = None
        self.head: Any = None

    def saw(self, end: str, who: str | None = None) -> None:
        """The calling thread (or ``who``) put (``tail``) or gets (``head``): name the channel
        once both ends are known, while a session is active."""
        who = who or stage()
        if who is None:
            return
        if end == "tail" and self.src is None:
            self.src = who
        elif end == "head" and self.dst is None:
            self.dst = who
        if self.name is None and self.src and self.dst and REGISTRY.active():
            self.name, tail, head = _declare(self.src, self.dst, self.capacity, self.transport)
            self.tail, self.head = _ring(tail, "tail"), _ring(head, "head")
            _channels.add(self)

    def detach(self) -> None:
        self.tail = self.head = None


_Queue = queue.Queue
_SimpleQueue = queue.SimpleQueue


class AutoQueue(_Queue):  # type: ignore[type-arg]
    """``queue.Queue`` as the program made it, its insertions and removals recorded and its
    waits marked (the standard implementation's steps, in the same order, under its lock)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is AutoQueue and _caller_internal():
            return _Queue(*args, **kwargs)  # the standard library's or streamscope's own
        return super().__new__(cls)

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._ss = _Channel(maxsize if maxsize > 0 else 0)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ss = self._ss
        if ss.name is None:
            with self.mutex:
                ss.saw("tail")
        tracker = _tracker()
        with self.not_full:
            if self.maxsize > 0:
                if not block:
                    if self._qsize() >= self.maxsize:
                        raise queue.Full
                elif self._qsize() >= self.maxsize:
                    prev = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
                    try:
                        if timeout is None:
                            while self._qsize() >= self.maxsize:
                                self.not_full.wait()
                        elif timeout < 0:
                            raise ValueError("'timeout' must be a non-negative number")
                        else:
                            endtime = monotonic() + timeout
                            while self._qsize() >= self.maxsize:
                                remaining = endtime - monotonic()
                                if remaining <= 0.0:
                                    raise queue.Full
                                self.not_full.wait(remaining)
                    finally:
                        if tracker is not None:
                            tracker.set(prev)
            self._put(item)
            self.unfinished_tasks += 1
            ss.n_in += 1
            if ss.tail is not None:
                ss.tail.record(ss.n_in)
            self.not_empty.notify()
        if tracker is not None:
            tracker.heartbeat()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ss = self._ss
        if ss.name is None:
            with self.mutex:
                ss.saw("head")
        tracker = _tracker()
        with self.not_empty:
            if not block:
                if not self._qsize():
                    raise queue.Empty
            elif not self._qsize():
                prev = tracker.set(State.BLOCKED_IN) if tracker is not None else 0
                try:
                    if timeout is None:
                        while not self._qsize():
                            self.not_empty.wait()
                    elif timeout < 0:
                        raise ValueError("'timeout' must be a non-negative number")
                    else:
                        endtime = monotonic() + timeout
                        while not self._qsize():
                            remaining = endtime - monotonic()
                            if remaining <= 0.0:
                                raise queue.Empty
                            self.not_empty.wait(remaining)
                finally:
                    if tracker is not None:
                        tracker.set(prev)
            item = self._get()
            ss.n_out += 1
            if ss.head is not None:
                ss.head.record(ss.n_out)
            self.not_full.notify()
        if tracker is not None:
            tracker.heartbeat()
        return item

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def get_nowait(self) -> Any:
        return self.get(block=False)


class AutoSimpleQueue(_SimpleQueue):  # type: ignore[type-arg]
    """``queue.SimpleQueue`` as the program made it, recorded: unbounded, so only a get waits
    (and is marked blocked while it does)."""

    _ss: _Channel
    _ss_lock: threading.Lock

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is AutoSimpleQueue and _caller_internal():
            return _SimpleQueue()
        q = super().__new__(cls)
        q._ss = _Channel(0)
        q._ss_lock = threading.Lock()
        return q

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        ss = self._ss
        if ss.name is None:
            with self._ss_lock:
                ss.saw("tail")
        tracker = _tracker()
        with self._ss_lock:
            super().put(item, block, timeout)
            ss.n_in += 1
            if ss.tail is not None:
                ss.tail.record(ss.n_in)
        if tracker is not None:
            tracker.heartbeat()

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        ss = self._ss
        if ss.name is None:
            with self._ss_lock:
                ss.saw("head")
        tracker = _tracker()
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
        with self._ss_lock:
            ss.n_out += 1
            if ss.head is not None:
                ss.head.record(ss.n_out)
        if tracker is not None:
            tracker.heartbeat()
        return item

    def put_nowait(self, item: Any) -> None:
        self.put(item, block=False)

    def get_nowait(self) -> Any:
        return self.get(block=False)


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
                _, tail, head = _declare(src.decode(), dst.decode(), self.capacity, "process")
                self._probes[1], self._probes[2], self._probes[0] = tail, head, 1

    def _ring(self, end: str) -> Any:
        """This process's ring for ``end`` (made on first use; None: unwatched, or no session)."""
        key = (os.getpid(), end)
        ring = self._rings.get(key)
        if ring is None and self._probes[0] and REGISTRY.active():
            ring = self._rings[key] = _ring(self._probes[1 if end == "tail" else 2], end)
        return ring

    def put(self, obj: Any, block: bool = True, timeout: float | None = None) -> None:
        if not self._probes[0]:
            self._saw("tail")
        tracker = _tracker()
        free = self._free
        if free is not None and not free.acquire(False):
            if not block:
                raise queue.Full
            prev = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
            try:
                if not free.acquire(True, timeout):
                    raise queue.Full
            finally:
                if tracker is not None:
                    tracker.set(prev)
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
        tracker = _tracker()
        item = self._take(tracker, block, timeout)
        self._taken(self._ring("head"))
        if tracker is not None:
            tracker.heartbeat()
        return item

    def task_done(self) -> None:
        self._q.task_done()

    def join(self) -> None:
        self._q.join()


_AsyncQueue = asyncio.Queue
#: Per task: its stage's tracker (None: not one of the program's, or no session).
_tasks: weakref.WeakKeyDictionary[asyncio.Task[Any], native.StateTracker | None] = (
    weakref.WeakKeyDictionary()
)
_task_serial = itertools.count(1)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no loop runs in this thread
        return None


def task_stage(task: asyncio.Task[Any]) -> str | None:
    """The stage an asyncio task works for: its coroutine function's name (None: a task of
    streamscope's or the standard library's own)."""
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    if frame is not None and _internal(frame.f_globals.get("__name__")):
        return None
    code = getattr(coro, "cr_code", None)
    name = getattr(code, "co_qualname", None) or getattr(coro, "__qualname__", None)
    return name.replace("<locals>.", "") if isinstance(name, str) else None


def _loop_resource() -> ResourceInfo:
    """The event loop a task runs on: a resource of its own, in its process and thread."""
    where = "" if os.getpid() == REGISTRY.owner else f", pid {os.getpid()}"
    thread = threading.current_thread()
    on = "" if thread is threading.main_thread() else f", thread {thread.name}"
    return ResourceInfo(f"asyncio loop{on}{where}", "asyncio")


#: How often an event loop's lag is sampled (s).
LAG_EVERY_S = 0.05
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopLag] = weakref.WeakKeyDictionary()


class _LoopLag:
    """An event loop's lag: every ``LAG_EVERY_S`` on average (at random, so as not to fall in
    step with the program) a callback due then records how late the loop ran it, as an
    interval of the timer probe ``loopN.lag`` (``timer(loop*.lag)``)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str) -> None:
        self.loop = loop
        self.name = name
        self.ring: Any = None
        self.rng = random.Random()
        probe = f"{name}.lag"
        rec = REGISTRY.recorder()
        if rec is None or REGISTRY.directory is None:
            return
        if "timer" not in taps_for(REGISTRY.watches, probe=probe):
            return
        pid = next_probe_ids(REGISTRY.directory, 1)
        declare(REGISTRY.directory, Topology("", probes=(ProbeInfo(pid, "timer", probe),)))
        self.ring = rec.tap(pid, Kind.DURATION, cost=COST_CALL).ring
        due = loop.time() + LAG_EVERY_S
        loop.call_at(due, self.tick, due)

    def tick(self, due: float) -> None:
        if self.ring is None:  # the session ended
            return
        now = self.loop.time()
        self.ring.record(max(round((now - due) * 1e9), 0))
        # at a random phase: a program that blocks its loop periodically is not sampled only
        # between its blocks
        due = now + LAG_EVERY_S * (0.5 + self.rng.random())
        self.loop.call_at(due, self.tick, due)

    def stop(self) -> None:
        self.ring = None


def _watch_loop() -> None:
    """Measure the running loop's lag from its first task that puts or gets on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    if loop not in _loops:
        n = len(_loops) + 1
        _loops[loop] = _LoopLag(loop, "loop" if n == 1 else f"loop{n}")


def _task_tracker(task: asyncio.Task[Any] | None) -> native.StateTracker | None:
    """``task``'s tracker, made (and the task declared a worker of its stage) on its first put
    or get: from then on it is busy but while it waits on a queue, idle once it is done."""
    if task is None:
        return None
    try:
        return _tasks[task]
    except KeyError:
        pass
    tracker = None
    name = task_stage(task)
    if name is not None and REGISTRY.active():
        _watch_loop()
        REGISTRY.add_stage(name)
        tracker = REGISTRY.tracker(name, ("task", next(_task_serial)), _loop_resource())
        if tracker is not None:
            tracker.set(State.BUSY)
            done = tracker
            task.add_done_callback(lambda _t: done.set(State.IDLE))
    _tasks[task] = tracker
    return tracker


class AutoAsyncQueue(_AsyncQueue):  # type: ignore[type-arg]
    """``asyncio.Queue`` as the program made it, recorded: a task awaiting ``get`` on an empty
    queue is blocked in, one awaiting ``put`` on a full one blocked out, and otherwise busy.
    One event loop's tasks take turns, so its counts need no lock."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        if cls is AutoAsyncQueue and _caller_internal():
            return _AsyncQueue(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._ss = _Channel(maxsize if maxsize > 0 else 0, "asyncio")

    def _end(self, end: str) -> native.StateTracker | None:
        task = _current_task()
        if self._ss.name is None and task is not None:
            self._ss.saw(end, task_stage(task))
        return _task_tracker(task)

    def put_nowait(self, item: Any) -> None:
        ss = self._ss
        if ss.name is None:
            self._end("tail")
        super().put_nowait(item)
        ss.n_in += 1
        if ss.tail is not None:
            ss.tail.record(ss.n_in)
        task = _current_task()
        tracker = _tasks.get(task) if task is not None else None
        if tracker is not None:
            tracker.heartbeat()

    def get_nowait(self) -> Any:
        ss = self._ss
        if ss.name is None:
            self._end("head")
        item = super().get_nowait()
        ss.n_out += 1
        if ss.head is not None:
            ss.head.record(ss.n_out)
        task = _current_task()
        tracker = _tasks.get(task) if task is not None else None
        if tracker is not None:
            tracker.heartbeat()
        return item

    async def put(self, item: Any) -> None:
        tracker = self._end("tail")
        if tracker is None or not self.full():
            return await super().put(item)
        prev = tracker.set(State.BLOCKED_OUT)
        try:  # the standard wait, then put_nowait (recorded)
            return await super().put(item)
        finally:
            tracker.set(prev)

    async def get(self) -> Any:
        tracker = self._end("head")
        if tracker is None or not self.empty():
            return await super().get()
        prev = tracker.set(State.BLOCKED_IN)
        try:
            return await super().get()
        finally:
            tracker.set(prev)


class StageTarget:
    """A process's target, run as a worker of the stage named after it (picklable, so a
    spawned child gets it too, and installs the instrumentation there first)."""

    def __init__(self, target: Callable[..., Any], name: str) -> None:
        self.target = target
        self.name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        install()
        # a forked child starts as a copy of the thread that started it: its tracker is the
        # parent's, writing into the parent's ring, and must not be touched here
        native.bind_tracker(None)
        _local.entered = False
        _main_stage[0] = self.name
        _local.stage = self.name
        try:
            return self.target(*args, **kwargs)
        finally:
            _leave()


class PoolWorker:
    """A ``multiprocessing.Pool`` worker process's loop, as the standard one runs it, each task
    a piece of work of the stage named after the function it applies (``pool.map(parse, …)``:
    ``parse``), this process a worker of it: blocked in while it waits for a task, busy while it
    runs one (picklable: a spawned pool worker gets it too)."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target

    def __call__(
        self,
        inqueue: Any,
        outqueue: Any,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        maxtasks: int | None = None,
        wrap_exception: bool = False,
    ) -> None:
        mpool = _mpool()
        install()
        native.bind_tracker(None)
        _local.entered = False
        put, get = outqueue.put, inqueue.get
        if hasattr(inqueue, "_writer"):
            inqueue._writer.close()
            outqueue._reader.close()
        if initializer is not None:
            initializer(*initargs)
        tracker: native.StateTracker | None = None
        completed = 0
        try:
            while maxtasks is None or (maxtasks and completed < maxtasks):
                prev = tracker.set(State.BLOCKED_IN) if tracker is not None else 0
                try:
                    task = get()
                except (EOFError, OSError):
                    break
                finally:
                    if tracker is not None:
                        tracker.set(prev)
                if task is None:
                    break
                job, i, func, args, kwds = task
                if tracker is None and not getattr(_local, "entered", False):
                    tracker = self._enter(func, args)
                try:
                    result = (True, func(*args, **kwds))
                except Exception as e:
                    if wrap_exception and func is not mpool._helper_reraises_exception:
                        e = mpool.ExceptionWithTraceback(e, e.__traceback__)
                    result = (False, e)
                try:
                    put((job, i, result))
                except Exception as e:
                    put((job, i, (False, mpool.MaybeEncodingError(e, result[1]))))
                del task, job, result, func, args, kwds
                completed += 1
        finally:
            _leave()

    @staticmethod
    def _enter(func: Any, args: Any) -> native.StateTracker | None:
        """The stage of the pool's first task here: the function it maps (``mapstar`` and
        ``starmapstar`` carry it first in their arguments)."""
        mpool = _mpool()
        fn = func
        if func in (mpool.mapstar, mpool.starmapstar) and args and args[0]:
            fn = args[0][0]
        _main_stage[0] = callable_name(fn)
        _local.stage = _main_stage[0]
        return _tracker()


class ExecutorWorker:
    """A ``ProcessPoolExecutor`` worker process, run by the standard loop with its call queue's
    ``get`` watched: the process is a worker of the stage named after the function its first
    call applies (``executor.map(parse, …)``: ``parse``), blocked while it waits for a call,
    busy running one (picklable, for spawned workers)."""

    def __init__(self, target: Callable[..., Any]) -> None:
        self.target = target

    def __call__(self, call_queue: Any, *rest: Any, **kw: Any) -> Any:
        install()
        native.bind_tracker(None)
        _local.entered = False
        get = call_queue.get

        def watched_get(block: bool = True, timeout: float | None = None) -> Any:
            tracker = native.bound_tracker()
            prev = tracker.set(State.BLOCKED_IN) if tracker is not None else 0
            try:
                item = get(block, timeout)
            finally:
                if tracker is not None:
                    tracker.set(prev)
            fn = getattr(item, "fn", None)
            if fn is not None and not getattr(_local, "entered", False):
                chunked = isinstance(fn, functools.partial) and fn.args
                _main_stage[0] = callable_name(fn.args[0] if chunked else fn)
                _local.stage = _main_stage[0]
                _tracker()
            return item

        call_queue.get = watched_get
        try:
            return self.target(call_queue, *rest, **kw)
        finally:
            _leave()


def _executor_worker() -> Any:
    import concurrent.futures.process

    return getattr(concurrent.futures.process, "_process_worker", None)


_saved: dict[str, Any] = {}


def _mpool() -> Any:
    """``multiprocessing.pool``, whose worker loop and helpers its stubs leave out."""
    import multiprocessing.pool

    return multiprocessing.pool


def _pool_worker() -> Any:
    return _mpool().worker


def installed() -> bool:
    return bool(_saved)


def install() -> None:
    """Put the instrumented queues in the standard modules' place and follow every thread and
    process the program starts (idempotent; ``uninstall`` undoes it)."""
    if _saved:
        return
    ctx_cls = multiprocessing.context.BaseContext
    _saved.update(
        queue_Queue=queue.Queue,
        queue_SimpleQueue=queue.SimpleQueue,
        ctx_Queue=ctx_cls.Queue,
        ctx_JoinableQueue=ctx_cls.JoinableQueue,
        bootstrap=threading.Thread._bootstrap_inner,  # type: ignore[attr-defined]
        start=multiprocessing.process.BaseProcess.start,
    )
    queue.Queue = AutoQueue  # type: ignore[misc]
    queue.SimpleQueue = AutoSimpleQueue  # type: ignore[misc]
    asyncio.Queue = asyncio.queues.Queue = AutoAsyncQueue  # type: ignore[misc]

    def ctx_queue(self: Any, maxsize: int = 0) -> Any:
        if _caller_internal():
            return _saved["ctx_Queue"](self, maxsize)
        return AutoMPQueue(self, maxsize)

    def ctx_joinable(self: Any, maxsize: int = 0) -> Any:
        if _caller_internal():
            return _saved["ctx_JoinableQueue"](self, maxsize)
        return AutoMPQueue(self, maxsize, joinable=True)

    ctx_cls.Queue = ctx_queue  # type: ignore[method-assign]
    ctx_cls.JoinableQueue = ctx_joinable  # type: ignore[method-assign]
    bootstrap = _saved["bootstrap"]

    def bootstrap_inner(self: threading.Thread) -> None:
        _local.stage = _thread_stage(self)
        try:
            bootstrap(self)
        finally:
            _leave()

    threading.Thread._bootstrap_inner = bootstrap_inner  # type: ignore[attr-defined]
    start = _saved["start"]

    def process_start(self: Any) -> None:
        target = getattr(self, "_target", None)
        if target is _pool_worker():  # a Pool's worker: a worker of the stage it maps
            self._target = PoolWorker(target)
        elif target is not None and target is _executor_worker():
            self._target = ExecutorWorker(target)
        elif target is not None and not isinstance(
            target, (StageTarget, PoolWorker, ExecutorWorker)
        ):
            if not _internal(getattr(target, "__module__", None)):
                self._target = StageTarget(target, callable_name(target))
        elif target is None and not _internal(type(self).__module__):
            self._target = StageTarget(self.run, callable_name(type(self)))
        start(self)

    multiprocessing.process.BaseProcess.start = process_start  # type: ignore[method-assign]
    # ``multiprocessing.Queue`` and friends are the default context's bound methods, bound
    # when ``multiprocessing`` was imported: rebind them to the patched class's.
    for name in ("Queue", "JoinableQueue"):
        setattr(mp, name, getattr(mp.context._default_context, name))


def uninstall() -> None:
    """The standard modules as they were; channels made meanwhile stop recording."""
    if not _saved:
        return
    queue.Queue = _saved["queue_Queue"]  # type: ignore[misc]
    queue.SimpleQueue = _saved["queue_SimpleQueue"]  # type: ignore[misc]
    asyncio.Queue = asyncio.queues.Queue = _AsyncQueue  # type: ignore[misc]
    ctx_cls = multiprocessing.context.BaseContext
    ctx_cls.Queue = _saved["ctx_Queue"]  # type: ignore[method-assign]
    ctx_cls.JoinableQueue = _saved["ctx_JoinableQueue"]  # type: ignore[method-assign]
    threading.Thread._bootstrap_inner = _saved["bootstrap"]  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = _saved["start"]  # type: ignore[method-assign]
    for name in ("Queue", "JoinableQueue"):
        setattr(mp, name, getattr(mp.context._default_context, name))
    _saved.clear()
    for ch in list(_channels):
        ch.detach()
    for lag in list(_loops.values()):
        lag.stop()
    _loops.clear()
    _names.clear()


__all__ = [
    "MAIN",
    "AutoAsyncQueue",
    "AutoMPQueue",
    "AutoQueue",
    "AutoSimpleQueue",
    "ExecutorWorker",
    "PoolWorker",
    "StageTarget",
    "callable_name",
    "install",
    "installed",
    "stage",
    "task_stage",
    "uninstall",
]
