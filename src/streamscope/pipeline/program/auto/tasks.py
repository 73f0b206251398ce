"""``asyncio.Queue`` as a program run as it is makes it, its tasks as workers of their stages.

In: the program's puts and gets, from the tasks of its event loops. Out: the queue's records, as
a thread queue's; each task a worker of the stage named after its coroutine function (busy, but
blocked while it awaits the queue; idle once done); and each loop's lag, sampled now and then
(the timer ``loop.lag``, ``loop2.lag``…, when a query uses it).
"""

from __future__ import annotations

import asyncio
import asyncio.tasks
import functools
import itertools
import os
import threading
import types
import weakref
from typing import Any

from streamscope.core import native
from streamscope.core.records import Kind, State
from streamscope.core.rings import declare, next_probe_ids
from streamscope.core.topology import ProbeInfo, ResourceInfo, Topology
from streamscope.pipeline.program.auto.channels import ProgramChannel
from streamscope.pipeline.program.auto.claims import claim_stage
from streamscope.pipeline.program.auto.naming import Who, who_of_task
from streamscope.pipeline.program.auto.stages import (
    in_own_thread,
    internal,
    made_internally,
    stage,
    thread_tracker,
)
from streamscope.pipeline.program.registry import REGISTRY, taps_for
from streamscope.pipeline.run.looplag import LagSampler
from streamscope.probes.taps import COST_CALL

#: The standard library's own classes, which its own code and streamscope's keep getting.
StandardAsyncQueue = asyncio.Queue
StandardAsyncLifoQueue = asyncio.LifoQueue
StandardAsyncPriorityQueue = asyncio.PriorityQueue
StandardTask = asyncio.tasks.Task
#: Per task of the process: its stage and its tracker (None: not one of the program's, or no
#: session); tasks are found as they run, not handed over.
_tasks: weakref.WeakKeyDictionary[
    asyncio.Task[Any], tuple[str | None, native.StateTracker | None]
] = weakref.WeakKeyDictionary()
_NONE: tuple[str | None, native.StateTracker | None] = (None, None)
#: Serial of the process's tasks without a name of their own (each gets a stage name).
_task_serial = itertools.count(1)


def _current_task() -> asyncio.Task[Any] | None:
    try:
        return asyncio.current_task()
    except RuntimeError:  # no loop runs in this thread
        return None


def task_who(task: asyncio.Task[Any]) -> Who | None:
    """What an asyncio task works as (``naming.who_of_task``: its name, if the program gave it
    one, else its coroutine function, or the program's function it carries); None: a task of
    streamscope's or the standard library's own (its code theirs, or made in a thread of
    streamscope's own)."""
    if in_own_thread():
        return None
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    if frame is not None and internal(frame.f_globals.get("__name__")):
        return None
    code = getattr(coro, "cr_code", None) or getattr(coro, "gi_code", None)
    if not isinstance(code, types.CodeType):
        return None
    arguments = ()
    if frame is not None:
        names = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        arguments = tuple(frame.f_locals[n] for n in names if n in frame.f_locals)
    return who_of_task(task.get_name(), code, arguments)


#: Coroutines that hand items to other tasks rather than work on them (a pypeln stage's own
#: task, which starts a task per item): their tasks are at their stage's queues' ends, but
#: not workers of it. By module, then qualified name.
DISPATCHERS = {"pypeln.task.worker": ("Worker.__call__",)}
#: What such a coroutine's object runs (its ``process_fn``) where that works on the items in
#: the coroutine's own task: pypeln's ``FromIterable`` takes each item from the iterable and
#: puts it on itself, its task the stage's one worker.
WORKING = ("FromIterable",)


def _dispatches(task: asyncio.Task[Any]) -> bool:
    coro = task.get_coro()
    frame = getattr(coro, "cr_frame", None)
    code = getattr(coro, "cr_code", None)
    if frame is None or code is None:
        return False
    if code.co_qualname not in DISPATCHERS.get(frame.f_globals.get("__name__", ""), ()):
        return False
    runs = getattr(frame.f_locals.get("self"), "process_fn", None)
    return type(runs).__name__ not in WORKING


def _loop_resource() -> ResourceInfo:
    """The event loop a task runs on: a resource of its own, in its process and thread."""
    where = "" if os.getpid() == REGISTRY.owner else f", pid {os.getpid()}"
    thread = threading.current_thread()
    on = "" if thread is threading.main_thread() else f", thread {thread.name}"
    return ResourceInfo(f"asyncio loop{on}{where}", "asyncio")


#: Each event loop's lag sampler, in the order the loops were found (None: unwatched): loops
#: of the process, found as their tasks run.
_loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LagSampler | None] = (
    weakref.WeakKeyDictionary()
)


def _lag_sampler(loop: asyncio.AbstractEventLoop, name: str) -> LagSampler | None:
    """``loop``'s lag sampled into the timer probe ``NAME.lag`` (``timer(loop*.lag)``), when a
    query uses it."""
    probe = f"{name}.lag"
    rec = REGISTRY.recorder()
    if rec is None or REGISTRY.directory is None:
        return None
    if "timer" not in taps_for(REGISTRY.watches, probe=probe):
        return None
    pid = next_probe_ids(REGISTRY.directory, 1)
    declare(REGISTRY.directory, Topology("", probes=(ProbeInfo(pid, "timer", probe),)))
    return LagSampler(loop, rec.tap(pid, Kind.DURATION, cost=COST_CALL).ring.record)


#: The loop ``_watch_loop`` saw last in this process (most calls come from one loop).
_last_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None


def _watch_loop() -> None:
    """Measure the running loop's lag from its first task that puts or gets on."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    global _last_loop
    if _last_loop is not None and _last_loop() is loop:  # the loop seen last: no weak
        return  # dictionary to look in
    _last_loop = weakref.ref(loop)
    if loop not in _loops:
        n = len(_loops) + 1
        _loops[loop] = _lag_sampler(loop, "loop" if n == 1 else f"loop{n}")


def _task_worker(
    task: asyncio.Task[Any] | None, end: str = "", queue: str = ""
) -> tuple[str | None, native.StateTracker | None]:
    """``task``'s stage and tracker (both None: not one of the program's), from when it was made
    (``AutoTask``) or, for a task made otherwise, its first queue operation."""
    if task is None:
        return _NONE
    got = _tasks.get(task)
    return got if got is not None else start_task(task)


def current_tracker() -> native.StateTracker | None:
    """The tracker of the task running now (None: no task, or not one of the program's)."""
    return _task_worker(_current_task())[1]


def current_worker(end: str = "") -> tuple[str | None, native.StateTracker | None]:
    """The stage and tracker of the task running now (both None: no task, or not one of the
    program's), its first operation at ``end``."""
    return _task_worker(_current_task(), end)


def idle_awaiting(await_: Any) -> Any:
    """An awaitable's ``__await__`` (a task's, a ``gather``'s future's): the task awaiting it
    idle until it is done (its own work over, as a thread joining a thread is)."""

    @functools.wraps(await_)
    def idle_await(self: Any) -> Any:
        tracker = None if self.done() else current_tracker()
        if tracker is None:
            return (yield from await_(self))
        prev = tracker.set(State.IDLE)
        try:
            return (yield from await_(self))
        finally:
            tracker.set(prev)

    return idle_await


def start_task(task: asyncio.Task[Any]) -> tuple[str | None, native.StateTracker | None]:
    """A task of the program's, made now: a worker of its stage (claimed by its code: a task
    is the same stage whichever queues it uses), busy from now until it is done, when its
    tracker goes back to its stage's idle ones for the next task to take (a stage's workers
    are as many as ran at once); a dispatcher's task only names the stage at its queues'
    ends."""
    who = task_who(task)
    if who is None:
        _tasks[task] = _NONE
        return _NONE
    name = claim_stage(who, "task", "")
    tracker = None
    if REGISTRY.active() and not _dispatches(task):
        _watch_loop()
        REGISTRY.add_stage(name)
        key = (name, id(task.get_loop()))
        idle = _idle.setdefault(key, [])
        if idle:
            tracker = idle.pop()
        elif _made.get(key, 0) < MAX_TASK_WORKERS:
            _made[key] = _made.get(key, 0) + 1
            tracker = REGISTRY.tracker(name, ("task", next(_task_serial)), _loop_resource())
        if tracker is not None:
            tracker.set(State.BUSY)
            REGISTRY.sample(tracker, task.get_coro())
            task.add_done_callback(functools.partial(_done, tracker, idle))
    _tasks[task] = (name, tracker)
    return name, tracker


def _done(tracker: native.StateTracker, idle: list[native.StateTracker], _task: object) -> None:
    tracker.set(State.IDLE)
    idle.append(tracker)


#: Per stage and event loop: the trackers of its tasks that are done, for the next to take,
#: and how many were made; process-wide, as the loops' tasks are the process's.
_idle: dict[tuple[str, int], list[native.StateTracker]] = {}
_made: dict[tuple[str, int], int] = {}
#: A stage's tasks on one loop measured at once, at most: a program making a task per item
#: (thousands alive together) has its stage measured by this many of them at a time (those
#: made first, then those that take their trackers as they finish), and costs the monitor no
#: more workers than that.
MAX_TASK_WORKERS = 128


class AutoTask(StandardTask):  # type: ignore[type-arg]
    """``asyncio.Task`` (what the event loops make their tasks of): a task of the program's is
    a worker of its stage from when it is made (``start_task``)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if REGISTRY.active():
            start_task(self)

    __await__ = __iter__ = idle_awaiting(StandardTask.__await__)


class AutoAsyncQueue(StandardAsyncQueue):  # type: ignore[type-arg]
    """``asyncio.Queue`` as the program made it, recorded: a task awaiting ``get`` on an empty
    queue is blocked in, one awaiting ``put`` on a full one blocked out, and otherwise busy.
    One event loop's tasks take turns, so its counts need no lock."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        standard = _STANDARD.get(cls)
        if standard is not None and made_internally():
            return standard(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, maxsize: int = 0) -> None:
        super().__init__(maxsize)
        self._ss = ProgramChannel(maxsize if maxsize > 0 else 0, "asyncio")

    def _end(self, end: str) -> native.StateTracker | None:
        """The calling task's tracker (a thread outside any event loop, as pypeln's iteration
        takes its last queue: the thread's), its stage noted at ``end`` until both are known."""
        ss = self._ss
        task = _current_task()
        if task is None:
            tracker = thread_tracker("out" if end == "tail" else "in", ss.id)
            name = stage()
        else:
            name, tracker = _task_worker(task)
        if ss.name is None and name is not None:
            ss.saw(end, name)
        return tracker

    def put_nowait(self, item: Any) -> None:
        ss = self._ss
        tracker = self._end("tail")
        super().put_nowait(item)
        ss.inserted()
        if tracker is not None:
            tracker.gave()

    def get_nowait(self) -> Any:
        ss = self._ss
        tracker = self._end("head")
        try:
            item = super().get_nowait()
        except asyncio.QueueEmpty:
            if tracker is not None and _current_task() is None:
                # A thread taking from an event loop's queue can only poll it (pypeln's
                # iteration does): it waits until it gets an item.
                tracker.set(State.BLOCKED_IN)
            raise
        ss.removed()
        if tracker is not None:
            if _current_task() is None:
                tracker.set(State.BUSY)
            tracker.took()
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


class AutoAsyncLifoQueue(AutoAsyncQueue):
    """``asyncio.LifoQueue`` as the program made it, recorded (the standard one's storage)."""

    _init = StandardAsyncLifoQueue._init
    _put = StandardAsyncLifoQueue._put
    _get = StandardAsyncLifoQueue._get


class AutoAsyncPriorityQueue(AutoAsyncQueue):
    """``asyncio.PriorityQueue`` as the program made it, recorded (the standard one's
    storage)."""

    _init = StandardAsyncPriorityQueue._init
    _put = StandardAsyncPriorityQueue._put
    _get = StandardAsyncPriorityQueue._get


#: Each recorded class and the standard one it stands for.
_STANDARD: dict[type, type] = {
    AutoAsyncQueue: StandardAsyncQueue,
    AutoAsyncLifoQueue: StandardAsyncLifoQueue,
    AutoAsyncPriorityQueue: StandardAsyncPriorityQueue,
}


def stop_lag_watch() -> None:
    """The session ended: no loop's lag is sampled any more, no task's tracker is kept."""
    global _last_loop
    _idle.clear()
    _made.clear()
    _last_loop = None
    for lag in list(_loops.values()):
        if lag is not None:
            lag.stop()
    _loops.clear()


__all__ = [
    "DISPATCHERS",
    "AutoAsyncLifoQueue",
    "AutoAsyncPriorityQueue",
    "AutoAsyncQueue",
    "AutoTask",
    "StandardAsyncLifoQueue",
    "StandardAsyncPriorityQueue",
    "StandardAsyncQueue",
    "StandardTask",
    "current_tracker",
    "current_worker",
    "idle_awaiting",
    "start_task",
    "stop_lag_watch",
    "task_who",
]
