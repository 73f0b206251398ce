"""The standard library patched so that a program run as it is shows its stages and channels.

In: ``install()`` inside a drop-in session. Out: the standard queue classes replaced by the
recorded ones, every thread the program starts working for its stage, and every process it
starts run under an entry that does the same there; ``uninstall()`` puts everything back.
"""

from __future__ import annotations

import asyncio
import asyncio.queues
import multiprocessing as mp
import multiprocessing.context
import multiprocessing.process
import queue
import threading
from collections.abc import Callable
from typing import Any

from streamscope.pipeline.auto.channels import forget_channels
from streamscope.pipeline.auto.mpqueue import AutoMPQueue
from streamscope.pipeline.auto.processes import (
    ExecutorWorker,
    PoolWorker,
    ProcessEntry,
    StageTarget,
    standard_executor_worker,
    standard_pool_worker,
)
from streamscope.pipeline.auto.queues import AutoQueue, AutoSimpleQueue
from streamscope.pipeline.auto.stages import (
    callable_name,
    internal,
    leave,
    made_internally,
    thread_stage,
    thread_state,
)
from streamscope.pipeline.auto.tasks import AutoAsyncQueue, StandardAsyncQueue, stop_lag_watch

#: What ``install`` replaced in the standard library, to put back (empty: not installed);
#: process-wide as the patched modules are.
_saved: dict[str, Any] = {}


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
    ctx_cls.Queue = _ctx_queue  # type: ignore[method-assign]
    ctx_cls.JoinableQueue = _ctx_joinable  # type: ignore[method-assign]
    threads = _following_threads(_saved["bootstrap"])
    processes = _following_processes(_saved["start"])
    threading.Thread._bootstrap_inner = threads  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = processes  # type: ignore[method-assign,assignment]
    _rebind_mp()


def uninstall() -> None:
    """The standard modules as they were; channels made meanwhile stop recording."""
    if not _saved:
        return
    queue.Queue = _saved["queue_Queue"]  # type: ignore[misc]
    queue.SimpleQueue = _saved["queue_SimpleQueue"]  # type: ignore[misc]
    asyncio.Queue = asyncio.queues.Queue = StandardAsyncQueue  # type: ignore[misc]
    ctx_cls = multiprocessing.context.BaseContext
    ctx_cls.Queue = _saved["ctx_Queue"]  # type: ignore[method-assign]
    ctx_cls.JoinableQueue = _saved["ctx_JoinableQueue"]  # type: ignore[method-assign]
    threading.Thread._bootstrap_inner = _saved["bootstrap"]  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = _saved["start"]  # type: ignore[method-assign]
    _rebind_mp()
    _saved.clear()
    forget_channels()
    stop_lag_watch()


def _rebind_mp() -> None:
    """``multiprocessing.Queue`` and friends are the default context's bound methods, bound
    when ``multiprocessing`` was imported: rebind them to the (un)patched class's."""
    for name in ("Queue", "JoinableQueue"):
        setattr(mp, name, getattr(mp.context._default_context, name))


def _ctx_queue(self: Any, maxsize: int = 0) -> Any:
    if made_internally():
        return _saved["ctx_Queue"](self, maxsize)
    return AutoMPQueue(self, maxsize)


def _ctx_joinable(self: Any, maxsize: int = 0) -> Any:
    if made_internally():
        return _saved["ctx_JoinableQueue"](self, maxsize)
    return AutoMPQueue(self, maxsize, joinable=True)


def _following_threads(bootstrap: Callable[[Any], None]) -> Callable[[Any], None]:
    """``Thread._bootstrap_inner`` (the standard one is ``bootstrap``): the thread runs working
    for its stage, idle once it returns."""

    def bootstrap_inner(self: threading.Thread) -> None:
        thread_state.stage = thread_stage(self)
        try:
            bootstrap(self)
        finally:
            leave()

    return bootstrap_inner


def _following_processes(
    start: Callable[[multiprocessing.process.BaseProcess], None],
) -> Callable[[multiprocessing.process.BaseProcess], None]:
    """``BaseProcess.start`` (the standard one is ``start``): the process's target runs under
    the entry that makes it a worker of its stage (a Pool's or an executor's process: of the
    stage of the function its tasks apply)."""

    def process_start(self: Any) -> None:
        target = getattr(self, "_target", None)
        if target is standard_pool_worker():
            self._target = PoolWorker(target, install)
        elif target is not None and target is standard_executor_worker():
            self._target = ExecutorWorker(target, install)
        elif target is not None and not isinstance(target, ProcessEntry):
            if not internal(getattr(target, "__module__", None)):
                self._target = StageTarget(target, callable_name(target), install)
        elif target is None and not internal(type(self).__module__):
            self._target = StageTarget(self.run, callable_name(type(self)), install)
        start(self)

    return process_start


__all__ = ["install", "installed", "uninstall"]
