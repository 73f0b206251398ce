"""Drop-in instrumentation for programs that already use threads and queues.

In: ``streamscope.Queue(maxsize, src=..., dst=...)`` where a program had ``queue.Queue(maxsize)``,
``streamscope.MPQueue`` for ``multiprocessing.Queue``, and ``with streamscope.stage("name"):``
around a stage's work. Out: the same ring records a ``Pipeline`` produces, once a
``streamscope.monitor(...)`` session activates the probes its queries need (``REGISTRY``).
"""

from __future__ import annotations

import functools
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from streamscope.core import native
from streamscope.core.records import Kind, State
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.mpqueue import MPQueue
from streamscope.pipeline.program.registry import REGISTRY, Registry

P = ParamSpec("P")
R = TypeVar("R")


class Queue(ThreadChannel, queue.Queue[Any]):  # type: ignore[override]
    """``queue.Queue`` with the same interface (and an instance of it), monitored when a
    session's queries need it: the native FIFO records its own insertions and removals, and a
    thread inside ``streamscope.stage`` is marked blocked while it really waits on it.

    ``src`` and ``dst`` name the stages that put and get (they become the channel ``src -> dst``).
    """

    transport = "thread"

    def __init__(self, maxsize: int = 0, *, src: str, dst: str, name: str | None = None) -> None:
        ThreadChannel.__init__(self, maxsize, name=name or f"{src} -> {dst}")
        self.src, self.dst = src, dst
        self.capacity = maxsize
        REGISTRY.add_queue(self)

    def attach(self, end: str, probe: int) -> None:
        rec = REGISTRY.recorder()
        if rec is not None:
            tap = rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET)
            setattr(self, end, tap.ring)

    def detach(self) -> None:
        self.tail = None
        self.head = None


#: Per thread of the process: the trackers and states ``stage()`` blocks replaced, to put
#: back when each block ends (blocks nest, and any thread may open one).
_saved = threading.local()


class stage:  # noqa: N801 - used like a function: ``with stage("x"):`` / ``@stage("x")``
    """Marks the current thread as working for stage ``name``: busy inside, idle after.

    While inside, monitored queues record when this stage blocks on them (its tracker is bound
    to the thread, and the queues mark the waits themselves).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        REGISTRY.add_stage(name)

    def __enter__(self) -> stage:
        tracker = REGISTRY.tracker(self.name)
        prev = native.bind_tracker(tracker)
        state = tracker.set(State.BUSY) if tracker is not None else State.IDLE
        stack: list[tuple[native.StateTracker | None, int]] | None = getattr(_saved, "stack", None)
        if stack is None:
            stack = _saved.stack = []
        stack.append((prev, state))
        return self

    def __exit__(self, *exc: object) -> None:
        prev_tracker, prev_state = _saved.stack.pop()
        tracker = native.bound_tracker()
        if tracker is not None:
            tracker.set(prev_state)
        native.bind_tracker(prev_tracker)

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with stage(self.name):
                return fn(*args, **kwargs)

        return wrapper


__all__ = ["REGISTRY", "MPQueue", "Queue", "Registry", "stage"]
