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

Its modules: ``stages`` (which stage a thread works for, its tracker), ``channels`` (what a queue
becomes), the recorded queues (``queues``, ``mpqueue``, ``tasks`` for asyncio), ``processes``
(the entries processes run under) and ``installer`` (the standard library patched).
"""

from __future__ import annotations

from streamscope.pipeline.auto.installer import install, installed, uninstall
from streamscope.pipeline.auto.mpqueue import counts_of
from streamscope.pipeline.auto.naming import Who
from streamscope.pipeline.auto.processes import ExecutorWorker, PoolWorker, StageTarget
from streamscope.pipeline.auto.queues import (
    AutoQueue,
    AutoSimpleQueue,
    StandardQueue,
    StandardSimpleQueue,
)
from streamscope.pipeline.auto.stages import MAIN, callable_name, stage, thread_who
from streamscope.pipeline.auto.tasks import AutoAsyncQueue, task_who

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
