"""Which stage each thread of a program run as it is works for, and its state tracker.

In: the calling thread (its target, its class, or the stage a process entry gave it). Out: its
stage's name (``stage``), and its tracker, made and declared on its first put or get.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from typing import Any

from streamscope.core import native
from streamscope.core.records import State
from streamscope.pipeline.registry import REGISTRY

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

#: The calling thread's stage (``stage``; unset: found by the installed thread bootstrap) and
#: whether it has entered it (``entered``: its tracker was looked for once); per thread of
#: the process, as the standard library's own thread start reads it.
thread_state = threading.local()
#: The stage of this process's main thread (a child process: its target's).
_main_stage = [MAIN]


def internal(module: str | None) -> bool:
    """Whether ``module`` is streamscope's or the standard library's own (not the program's)."""
    return not module or any(module == m or module.startswith(m + ".") for m in _OWN)


def made_internally(depth: int = 2) -> bool:
    """Whether the code that made a queue is streamscope's or the standard library's own
    (``depth``: its frame, counted from this function's)."""
    with contextlib.suppress(ValueError):
        return internal(sys._getframe(depth).f_globals.get("__name__"))
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


def thread_stage(t: threading.Thread) -> str | None:
    """The stage a thread works for: its target's name, its class's (a subclass with its own
    ``run``), or None for the standard library's and streamscope's own threads."""
    target = getattr(t, "_target", None)
    if target is None:
        cls = type(t)
        if cls is threading.Thread or internal(cls.__module__):
            return None
        return callable_name(cls)
    module = getattr(target, "__module__", None)
    if module == "concurrent.futures.thread":  # an executor's worker: the executor's name
        return t.name.rpartition("_")[0] or t.name
    return None if internal(module) else callable_name(target)


def stage() -> str | None:
    """The stage of the calling thread (None: not one of the program's)."""
    name: str | None = getattr(thread_state, "stage", None)
    if name is None and threading.current_thread() is threading.main_thread():
        return _main_stage[0]
    return name


def thread_tracker() -> native.StateTracker | None:
    """The calling thread's state tracker, made (and its worker declared) on its first put
    or get: from then on it is busy but while it waits on a queue."""
    tracker = native.bound_tracker()
    if tracker is not None or getattr(thread_state, "entered", False):
        return tracker
    thread_state.entered = True
    name = stage()
    if name is None or not REGISTRY.active():
        return None
    REGISTRY.add_stage(name)
    tracker = REGISTRY.tracker(name)
    if tracker is not None:
        native.bind_tracker(tracker)
        tracker.set(State.BUSY)
    return tracker


def leave() -> None:
    """The calling thread's work is over: its stage's worker is idle from now on."""
    tracker = native.bound_tracker()
    if tracker is not None and getattr(thread_state, "entered", False):
        tracker.set(State.IDLE)
        native.bind_tracker(None)
    thread_state.entered = False


def start_afresh() -> None:
    """A new process's main thread starts with no tracker of its own: a forked child is a copy
    of the thread that started it, whose tracker writes into the parent's ring and must not be
    touched here."""
    native.bind_tracker(None)
    thread_state.entered = False


def work_for(name: str) -> None:
    """From now on this process's main thread (the caller) works for stage ``name``."""
    _main_stage[0] = name
    thread_state.stage = name


__all__ = [
    "MAIN",
    "callable_name",
    "internal",
    "leave",
    "made_internally",
    "stage",
    "start_afresh",
    "thread_stage",
    "thread_state",
    "thread_tracker",
    "work_for",
]
