"""asyncio as a program run as it is has it, patched once the program imports it.

In: the ``asyncio`` module, as it finishes loading (``polling``), or at ``install`` where it was
loaded before. Out: its queues the recorded ones (``tasks``), its tasks workers of the stages
of their coroutines, and its waits waits (``waits``' description): awaiting ``asyncio.wait`` a
task is blocked in; awaiting its ``TaskGroup``'s end, a ``gather`` or another task idle;
reading a stream blocked in, draining one blocked out. A program that never imports asyncio
never loads it because it is watched (some 25 ms of its start: asyncio, ssl, sockets).
"""

from __future__ import annotations

import asyncio
import asyncio.queues
import asyncio.streams
import asyncio.taskgroups
import asyncio.tasks
import functools
import types
from collections.abc import Callable
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.tasks import (
    AutoAsyncLifoQueue,
    AutoAsyncPriorityQueue,
    AutoAsyncQueue,
    AutoTask,
    current_tracker,
    idle_awaiting,
)


def _task_waits(state: State) -> Callable[[Any], Any]:
    """A coroutine function (``asyncio.wait``, ``TaskGroup.__aexit__``) with the task awaiting
    it in ``state`` meanwhile."""

    def wrap(fn: Callable[..., Any]) -> Any:
        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Any:
            tracker = current_tracker()
            if tracker is None:
                return await fn(*args, **kwargs)
            prev = tracker.set(state)
            try:
                return await fn(*args, **kwargs)
            finally:
                tracker.set(prev)

        return call

    return wrap


def _is(replacement: Any) -> Callable[[Any], Any]:
    return lambda _standard: replacement


#: What ``asyncio.gather`` returns (a class of the module's own, not in its stubs).
_GatheringFuture: type = asyncio.tasks._GatheringFuture  # type: ignore[attr-defined]


def patches(module: types.ModuleType) -> Patches:
    """asyncio's queues, tasks and waits, as ``module`` (asyncio) is patched while the program
    is watched (``polling``)."""
    blocked_in, blocked_out = _task_waits(State.BLOCKED_IN), _task_waits(State.BLOCKED_OUT)
    return Patches({
        (asyncio, "Queue"): _is(AutoAsyncQueue), (asyncio.queues, "Queue"): _is(AutoAsyncQueue),
        (asyncio, "LifoQueue"): _is(AutoAsyncLifoQueue),
        (asyncio.queues, "LifoQueue"): _is(AutoAsyncLifoQueue),
        (asyncio, "PriorityQueue"): _is(AutoAsyncPriorityQueue),
        (asyncio.queues, "PriorityQueue"): _is(AutoAsyncPriorityQueue),
        (asyncio, "Task"): _is(AutoTask), (asyncio.tasks, "Task"): _is(AutoTask),
        (asyncio.tasks, "wait"): blocked_in, (asyncio, "wait"): blocked_in,
        (asyncio.taskgroups.TaskGroup, "__aexit__"): _task_waits(State.IDLE),
        (_GatheringFuture, "__await__"): idle_awaiting,
        (_GatheringFuture, "__iter__"): idle_awaiting,
        **{(asyncio.streams.StreamReader, name): blocked_in
           for name in ("read", "readline", "readuntil", "readexactly")},
        (asyncio.streams.StreamWriter, "drain"): blocked_out,
    })  # fmt: skip


__all__ = ["patches"]
