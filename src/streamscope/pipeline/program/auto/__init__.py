"""Unmodified programs: the standard queues watched, threads, processes and tasks as stages.

In: a program that uses ``queue``, ``multiprocessing`` or ``asyncio`` queues between threads,
processes, tasks, executors and pools (its own or a library's, such as pypeln's or mpire's),
run in its own process by ``asmain`` while ``install()`` is in force. Out: the drop-in's
records. A stage is what a worker does (``naming``): workers of the same code on the same queue
are one stage, named by the name the program gave them, the program's function they run, their
target, or their place in the flow; each queue is a channel named from the stages at its ends
(``src -> dst``), declared once both are known, its sequence numbers counted from its creation.
Queues, threads and tasks that streamscope or the standard library make for themselves are left
alone, and so is every queue's behaviour.

Its modules: ``naming`` (what a worker is, the claim table its names come from), ``stages``
(the calling thread's stage and tracker), ``channels`` (what a queue becomes), the recorded
queues (``queues``, ``mpqueue``, ``tasks`` for asyncio), ``waits`` (futures, executors,
joins), ``aio`` (asyncio, patched once the program imports it), ``pools``
(``multiprocessing.Pool``), ``processes`` (the entries processes run under), ``installer`` (the
standard library patched) and ``asmain`` (the program's own process).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamscope.pipeline.program.auto.installer import install, installed, uninstall
from streamscope.pipeline.program.auto.mpqueue import counts_of
from streamscope.pipeline.program.auto.naming import Who
from streamscope.pipeline.program.auto.processes import ExecutorWorker, PoolWorker, StageTarget
from streamscope.pipeline.program.auto.queues import (
    AutoQueue,
    AutoSimpleQueue,
    StandardQueue,
    StandardSimpleQueue,
)
from streamscope.pipeline.program.auto.stages import MAIN, callable_name, stage, thread_who

if TYPE_CHECKING:
    from streamscope.pipeline.program.auto.tasks import AutoAsyncQueue, task_who


def __getattr__(name: str) -> Any:
    """``AutoAsyncQueue`` and ``task_who``: asyncio's, loaded when asked for (a program that
    never imports asyncio never loads it because it is watched)."""
    if name in ("AutoAsyncQueue", "task_who"):
        from streamscope.pipeline.program.auto import tasks

        return getattr(tasks, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "MAIN",
    "AutoAsyncQueue",
    "AutoQueue",
    "AutoSimpleQueue",
    "ExecutorWorker",
    "PoolWorker",
    "StageTarget",
    "StandardQueue",
    "StandardSimpleQueue",
    "Who",
    "callable_name",
    "counts_of",
    "install",
    "installed",
    "stage",
    "task_who",
    "thread_who",
    "uninstall",
]
