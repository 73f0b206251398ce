"""The processes a program run as it is starts, each run as a worker of a stage.

In: a process's target as the program (or ``multiprocessing.Pool``, ``ProcessPoolExecutor``)
gave it. Out: the same target run under an entry that puts the instrumentation in place in the
new process first, then works for the stage named after the target, or after the function the
pool's tasks apply. Every entry is picklable, so a spawned process gets it too.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.pipeline.program.auto import costs
from streamscope.pipeline.program.auto.mpqueue import counts_of
from streamscope.pipeline.program.auto.naming import (
    FUNCTION,
    TARGET,
    Who,
    found_function,
    function_name,
    programs,
)
from streamscope.pipeline.program.auto.stages import (
    enter,
    leave,
    stage,
    start_afresh,
    thread_state,
    work_as,
)
from streamscope.pipeline.program.registry import REGISTRY


def applied(fn: Any) -> Who:
    """A pool's worker applying ``fn`` works as: the program's function, or (a library's) the
    function itself as the target."""
    code = getattr(fn, "__code__", None)
    ident = (
        f"{code.co_filename}:{code.co_firstlineno}:{code.co_qualname}"
        if code is not None
        else f"{getattr(fn, '__module__', '')}:{function_name(fn)}"
    )
    return Who(function_name(fn), FUNCTION if programs(fn) else TARGET, ident)


def pool_module() -> ModuleType:
    """``multiprocessing.pool``, whose worker loop and helpers its stubs leave out."""
    import multiprocessing.pool

    return multiprocessing.pool


def standard_pool_worker() -> Any:
    """The loop a ``multiprocessing.Pool``'s processes run."""
    return pool_module().worker


#: Modules whose process executors run their workers as ``concurrent.futures.process`` does
#: (a call queue of work items, each ``fn`` applied with its arguments): the standard one and
#: loky's (joblib's default backend, vendored or on its own).
EXECUTOR_MODULES = (
    "concurrent.futures.process",
    "joblib.externals.loky.process_executor",
    "loky.process_executor",
)


def executor_worker(target: Any) -> bool:
    """Whether ``target`` is the loop a process executor's processes run (of the modules in
    ``EXECUTOR_MODULES`` already imported: one not imported has started no process)."""
    for name in EXECUTOR_MODULES:
        module = sys.modules.get(name)
        if module is not None and target is getattr(module, "_process_worker", None):
            return True
    return False


def call_function(fn: Any) -> Any:
    """The function a process executor's work item applies, as the program gave it: the
    function an ``executor.map`` chunk maps (a ``partial`` of ``_process_chunk``), the
    program's function a library's call object carries (joblib's batch of ``delayed`` calls),
    else ``fn``."""
    if isinstance(fn, functools.partial) and fn.args:
        return fn.args[0]
    if programs(fn):
        return fn
    found = found_function(fn, (), {})
    return found if found is not None else fn


class ProcessEntry:
    """What a process the program starts runs in place of ``target``: first ``setup``, the
    installer's ``install`` (a spawned process starts without it; pickled by reference, so the
    child imports it), then the target."""

    def __init__(self, target: Callable[..., Any], setup: Callable[[], None]) -> None:
        self.target = target
        self.setup = setup


class StageTarget(ProcessEntry):
    """A process's target, run as ``who`` (``naming.who_of_process``): its stage claimed at
    its first queue operation."""

    def __init__(self, target: Callable[..., Any], who: Who, setup: Callable[[], None]) -> None:
        super().__init__(target, setup)
        self.who = who

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.setup()
        start_afresh()
        work_as(self.who)
        try:
            return self.target(*args, **kwargs)
        finally:
            leave()
            costs.told(REGISTRY.directory)  # a child ends by os._exit: no atexit


class PoolWorker(ProcessEntry):
    """A ``multiprocessing.Pool`` worker process's loop, as the standard one runs it, each task
    a piece of work of the stage named after the function it applies (``pool.map(parse, …)``:
    ``parse``), this process a worker of it: blocked in while it waits for a task, busy while it
    runs one. ``pool``: an id of the pool (its processes' stage is one per pool and function)."""

    def __init__(self, target: Callable[..., Any], setup: Callable[[], None], pool: str) -> None:
        super().__init__(target, setup)
        self.pool = pool

    def __call__(
        self,
        inqueue: Any,
        outqueue: Any,
        initializer: Callable[..., Any] | None = None,
        initargs: tuple[Any, ...] = (),
        maxtasks: int | None = None,
        wrap_exception: bool = False,
    ) -> None:
        mpool = pool_module()
        self._begin(inqueue, outqueue, initializer, initargs)
        put, get = outqueue.put, inqueue.get
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
                if tracker is None and not getattr(thread_state, "entered", False):
                    tracker = self._enter(func, args, self.pool)
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
            leave()
            costs.told(REGISTRY.directory)  # a child ends by os._exit: no atexit

    def _begin(
        self,
        inqueue: Any,
        outqueue: Any,
        initializer: Callable[..., Any] | None,
        initargs: tuple[Any, ...],
    ) -> None:
        """What the standard loop does before its first task, after our setup."""
        self.setup()
        start_afresh()
        if hasattr(inqueue, "_writer"):
            inqueue._writer.close()
            outqueue._reader.close()
        if initializer is not None:
            initializer(*initargs)

    @staticmethod
    def _enter(func: Any, args: Any, pool: str) -> native.StateTracker | None:
        """The stage of the pool's first task here: the function it maps (``mapstar`` and
        ``starmapstar`` carry it first in their arguments)."""
        mpool = pool_module()
        fn = func
        if func in (mpool.mapstar, mpool.starmapstar) and args and args[0]:
            fn = args[0][0]
        return enter(applied(fn), pool)


class ExecutorWorker(ProcessEntry):
    """A ``ProcessPoolExecutor`` worker process (or loky's), run by the standard loop with its
    call queue's ``get`` watched: the process is a worker of the stage named after the
    function its first call applies (``executor.map(parse, …)``: ``parse``), blocked in while
    it waits for a call, busy running one and handing its result back. ``pool``: an id of the
    executor."""

    def __init__(self, target: Callable[..., Any], setup: Callable[[], None], pool: str) -> None:
        super().__init__(target, setup)
        self.pool = pool

    def __call__(self, call_queue: Any, result_queue: Any, *rest: Any, **kw: Any) -> Any:
        self.setup()
        start_afresh()
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
            if fn is not None and not getattr(thread_state, "entered", False):
                enter(applied(call_function(fn)), self.pool)
                calls = counts_of(call_queue)
                if calls is not None and not calls.probe(0):
                    calls.saw("head", stage())  # its first get was before it knew its stage
            return item

        call_queue.get = watched_get
        try:
            return self.target(call_queue, result_queue, *rest, **kw)
        finally:
            leave()
            costs.told(REGISTRY.directory)  # a child ends by os._exit: no atexit


__all__ = [
    "EXECUTOR_MODULES",
    "ExecutorWorker",
    "PoolWorker",
    "ProcessEntry",
    "StageTarget",
    "call_function",
    "executor_worker",
    "pool_module",
    "standard_pool_worker",
]
