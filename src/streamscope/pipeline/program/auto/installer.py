"""The standard library patched so that a program run as it is shows its stages and channels.

In: ``install()`` inside a drop-in session. Out: the standard queue classes replaced by the
recorded ones, every thread the program starts working for its stage, and every process it
starts run under an entry that does the same there; ``uninstall()`` puts everything back.
"""

from __future__ import annotations

import functools
import multiprocessing.process
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from streamscope.pipeline.program.auto import costs, mpqueue, polling, pools, waits
from streamscope.pipeline.program.auto.channels import forget_channels
from streamscope.pipeline.program.auto.claims import vacate
from streamscope.pipeline.program.auto.naming import read_interpreter, who_of_process
from streamscope.pipeline.program.auto.processes import (
    ExecutorWorker,
    PoolWorker,
    ProcessEntry,
    StageTarget,
    executor_worker,
    standard_pool_worker,
)
from streamscope.pipeline.program.auto.queues import (
    AutoLifoQueue,
    AutoPriorityQueue,
    AutoQueue,
    AutoSimpleQueue,
    StandardLifoQueue,
    StandardPriorityQueue,
    StandardQueue,
    StandardSimpleQueue,
)
from streamscope.pipeline.program.auto.stages import internal, leave, thread_state, thread_who
from streamscope.pipeline.program.registry import REGISTRY

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
    read_interpreter()
    _saved.update(
        bootstrap=threading.Thread._bootstrap_inner,  # type: ignore[attr-defined]
        start=multiprocessing.process.BaseProcess.start,
    )
    queue.Queue = AutoQueue  # type: ignore[misc]
    queue.SimpleQueue = AutoSimpleQueue  # type: ignore[misc]
    queue.LifoQueue, queue.PriorityQueue = AutoLifoQueue, AutoPriorityQueue  # type: ignore[misc,assignment]
    mpqueue.PATCHES.apply()
    threads = _following_threads(_saved["bootstrap"])
    processes = _following_processes(_saved["start"])
    threading.Thread._bootstrap_inner = threads  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = processes  # type: ignore[method-assign,assignment]
    waits.PATCHES.apply()
    pools.PATCHES.apply()
    polling.install()  # asyncio's too, once the program imports it (``aio``)


def uninstall() -> None:
    """The standard modules as they were; channels made meanwhile stop recording."""
    if not _saved:
        return
    queue.Queue = StandardQueue  # type: ignore[misc]
    queue.SimpleQueue = StandardSimpleQueue  # type: ignore[misc]
    queue.LifoQueue, queue.PriorityQueue = StandardLifoQueue, StandardPriorityQueue  # type: ignore[misc]
    mpqueue.PATCHES.undo()
    threading.Thread._bootstrap_inner = _saved["bootstrap"]  # type: ignore[attr-defined]
    multiprocessing.process.BaseProcess.start = _saved["start"]  # type: ignore[method-assign]
    waits.PATCHES.undo()
    pools.PATCHES.undo()
    polling.uninstall()
    _saved.clear()
    forget_channels()
    tasks = sys.modules.get("streamscope.pipeline.program.auto.tasks")
    if tasks is not None:  # the program used asyncio
        tasks.stop_lag_watch()


def _following_threads(bootstrap: Callable[[Any], None]) -> Callable[[Any], None]:
    """``Thread._bootstrap_inner`` (the standard one is ``bootstrap``): the thread runs as the
    worker it was started as (``naming``), idle once it returns; an executor's thread runs
    each call as work of the call's stage."""

    def bootstrap_inner(self: threading.Thread) -> None:
        with costs.spent():
            thread_state.who = thread_who(self)
            thread_state.stage = None
            target = getattr(self, "_target", None)
            if getattr(target, "__module__", None) == "concurrent.futures.thread":
                waits.executor_thread(self)
        try:
            bootstrap(self)
        finally:
            with costs.spent():
                leave()
                who, name = thread_state.who, thread_state.stage
                if who is not None and name is not None:
                    vacate(who, name)
                if REGISTRY.active():
                    REGISTRY.retire_thread()  # a thread that ended is a worker gone

    return bootstrap_inner


def _pool_id(queue: Any) -> str:
    """An id of the pool whose processes take their work from ``queue``."""
    counts = mpqueue.counts_of(queue)
    if counts is not None:
        return counts.id
    return f"{os.getpid()}.p{id(queue)}"


def _following_processes(
    start: Callable[[multiprocessing.process.BaseProcess], None],
) -> Callable[[multiprocessing.process.BaseProcess], None]:
    """``BaseProcess.start`` (the standard one is ``start``): the process's target runs under
    the entry that makes it a worker of its stage (a Pool's or an executor's process: of the
    stage of the function its tasks apply)."""

    def process_start(self: Any) -> None:
        target = getattr(self, "_target", None)
        args = getattr(self, "_args", ())
        if target is standard_pool_worker():
            self._target = PoolWorker(target, install, _pool_id(args[0] if args else None))
        elif target is not None and executor_worker(target):
            self._target = ExecutorWorker(target, install, _pool_id(args[0] if args else None))
        elif target is not None and not isinstance(target, ProcessEntry):
            if not internal(getattr(target, "__module__", None)):
                self._target = StageTarget(target, who_of_process(self, target), install)
        elif target is None and not internal(type(self).__module__):
            # A subclass's own ``run`` is what the process runs (it may never call a target):
            # the entry stands in for it on this process object (the class's, bound here, so
            # that a spawned copy calls the class's and not the entry again).
            run = functools.partial(type(self).run, self)
            self.run = StageTarget(run, who_of_process(self, self.run), install)
        start(self)

    return process_start


__all__ = ["install", "installed", "uninstall"]
