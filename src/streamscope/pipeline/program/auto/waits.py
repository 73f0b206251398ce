"""What a program's threads wait on besides queues, as a program run as it is does it.

In: the standard library's executors, futures and joins, while ``install`` is in force. Out:
each call an executor's thread runs is work of the stage of its function (``ex.submit(fetch,
url)``: ``fetch``; the thread blocked in while it waits for the next call); a thread waiting on
futures (``result()``, ``exception()``, ``as_completed``, ``wait``) is blocked in, one joining a
thread or a process idle (its own work is over), each only while it waits. An asyncio task's
waits are ``aio``'s, patched once the program imports asyncio.
"""

from __future__ import annotations

import concurrent.futures
import concurrent.futures._base as futures_base
import concurrent.futures.thread as futures_thread
import contextlib
import functools
import multiprocessing.process
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.pipeline.program.auto.naming import who_started
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.stages import enter, leave, on_behalf_of, thread_state


@contextlib.contextmanager
def waiting(state: State) -> Iterator[None]:
    """The calling thread (if it is a worker of a stage) is in ``state`` while the block runs."""
    tracker = native.bound_tracker()
    if tracker is None:
        yield
        return
    prev = tracker.set(state)
    try:
        yield
    finally:
        tracker.set(prev)


def _while_waiting(fn: Callable[..., Any], state: State, ready: str | None = None) -> Any:
    """``fn`` with the calling thread in ``state`` while it runs (``ready``: the name of a
    method of its first argument that says there is nothing to wait for)."""

    @functools.wraps(fn)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if ready is not None and getattr(self, ready)():
            return fn(self, *args, **kwargs)
        with waiting(state):
            return fn(self, *args, **kwargs)

    return call


def _as_completed(fn: Callable[..., Iterator[Any]]) -> Callable[..., Iterator[Any]]:
    """``as_completed``, its caller blocked in while it waits for the next future (its own
    work between them is busy)."""

    @functools.wraps(fn)
    def as_completed(*args: Any, **kwargs: Any) -> Iterator[Any]:
        it = fn(*args, **kwargs)
        while True:
            with waiting(State.BLOCKED_IN):
                try:
                    f = next(it)
                except StopIteration:
                    return
            yield f

    return as_completed


def _wait(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wait(*args: Any, **kwargs: Any) -> Any:
        with waiting(State.BLOCKED_IN):
            return fn(*args, **kwargs)

    return wait


def _work_item_run(run: Callable[[Any], None]) -> Callable[[Any], None]:
    """``_WorkItem.run`` in an executor's thread of the program: the call is work of the stage
    of its function (claimed as a worker taking from the executor's queue)."""

    @functools.wraps(run)
    def run_item(self: Any) -> None:
        queue = getattr(thread_state, "executor_queue", None)
        if queue is not None:
            who = who_started(self.fn, tuple(self.args), dict(self.kwargs), None, True)
            if who != getattr(thread_state, "who", None):
                leave()
                enter(who, queue)
        run(self)

    return run_item


def _from_task(method: Callable[..., Any]) -> Callable[..., Any]:
    """``ThreadPoolExecutor.submit`` (and ``shutdown``, which wakes its threads through the
    same queue) from an asyncio task of the program's (``await loop.run_in_executor(pool, fn,
    x)``): the task puts into the executor's queue, not the thread running its event loop."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        tasks = sys.modules.get("streamscope.pipeline.program.auto.tasks")  # asyncio's, if used
        name = tasks.current_worker("out")[0] if tasks is not None else None
        if name is None:
            return method(self, *args, **kwargs)
        with on_behalf_of(name):
            return method(self, *args, **kwargs)

    return call


def executor_thread(t: threading.Thread) -> None:
    """In a thread an executor started, before it runs: an executor of the program's (its
    work queue recorded) has its calls claimed as work taken from that queue; one the standard
    library made for itself (an event loop's default) runs nothing of the program's stages."""
    args: tuple[Any, ...] = tuple(getattr(t, "_args", ()))
    ss = getattr(args[1] if len(args) > 1 else None, "_ss", None)
    thread_state.executor_queue = getattr(ss, "id", None)


def _blocked_in(fn: Callable[..., Any]) -> Any:
    return _while_waiting(fn, State.BLOCKED_IN, "done")


def _idle(fn: Callable[..., Any]) -> Any:
    return _while_waiting(fn, State.IDLE)


#: The executors', futures' and joins' methods, watched while installed; process-wide, as the
#: patched modules are.
PATCHES = Patches({
    (futures_thread._WorkItem, "run"): _work_item_run,
    (futures_thread.ThreadPoolExecutor, "submit"): _from_task,
    (futures_thread.ThreadPoolExecutor, "shutdown"): _from_task,
    (futures_base.Future, "result"): _blocked_in,
    (futures_base.Future, "exception"): _blocked_in,
    (futures_base, "as_completed"): _as_completed,
    (concurrent.futures, "as_completed"): _as_completed,
    (futures_base, "wait"): _wait,
    (concurrent.futures, "wait"): _wait,
    (threading.Thread, "join"): _idle,
    (multiprocessing.process.BaseProcess, "join"): _idle,
})  # fmt: skip


__all__ = ["PATCHES", "executor_thread", "waiting"]
