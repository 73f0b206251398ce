"""Which stage each thread of a program run as it is works for, and its state tracker.

In: the calling thread (what it was started as, ``naming.Who``, or what a process entry or an
executor's call made it) and its first queue operation. Out: its stage's name (``stage``,
claimed then), and its tracker, made and declared then.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

from streamscope.core import native
from streamscope.core.records import NO_STATE, State
from streamscope.pipeline.program.auto import costs
from streamscope.pipeline.program.auto.claims import claim_stage, occupy
from streamscope.pipeline.program.auto.naming import (
    MAIN_WHO,
    Who,
    function_name,
    refined,
    who_of_thread,
)
from streamscope.pipeline.program.registry import REGISTRY

#: The stage of a program's main thread.
MAIN = "main"
#: Modules whose queues and threads are their own business, not the program's stages.
_OWN = (
    "streamscope",
    "multiprocessing",
    "logging",
    "asyncio",
    "concurrent.futures.process",
    "joblib.externals.loky",
    "loky",
    "queue",
    "threading",
    "selectors",
    "subprocess",
    # streamz's nodes are the stages of a stream (``auto.streams``); its tasks and the thread
    # of tornado's loop it starts, and their queues, are its own
    "streamz",
    "tornado",
)

#: The calling thread's worker (``who``: what it was started as, ``pipeline.program.auto.naming``;
#: None: not one of the program's), its stage once its first queue operation claimed it
#: (``stage``), and whether it has entered it (``entered``: its tracker was looked for once);
#: per thread of the process, as the standard library's own thread start reads it.
thread_state = threading.local()
#: The main thread's worker in this process (a child process: set by its entry).
_main_who: list[Who | None] = [MAIN_WHO]


#: ``internal``'s answer per module name seen in this process (asked at every thread's start
#: and queue's making: a program has a few modules, and thousands of threads).
_internal: dict[str, bool] = {}


def internal(module: str | None) -> bool:
    """Whether ``module`` is streamscope's or the standard library's own (not the program's)."""
    if not module:
        return True
    known = _internal.get(module)
    if known is None:
        known = _internal[module] = any(module == m or module.startswith(m + ".") for m in _OWN)
    return known


def own_thread() -> None:
    """The calling thread is streamscope's own (the live page's server and its workers): it is
    no stage, and the queues and tasks it makes are not the program's, whatever code it runs
    (a web server's, which in a program would be the program's)."""
    thread_state.own = True


def in_own_thread() -> bool:
    """Whether the calling thread is streamscope's own (``own_thread``)."""
    return bool(getattr(thread_state, "own", False))


#: Modules that make queues on behalf of their callers: whoever called them made the queue (an
#: executor's work queue is the program's when the program made the executor, asyncio's
#: when the event loop made its default one).
_ON_BEHALF = ("concurrent.futures.thread", "multiprocessing.context", "multiprocessing.queues")


def made_internally(depth: int = 2, through: tuple[str, ...] = ()) -> bool:
    """Whether the code that made a queue is streamscope's or the standard library's own
    (``depth``: its frame, counted from this function's; frames of ``_ON_BEHALF``, of
    ``through`` and of this package looked through), or the calling thread is streamscope's
    own."""
    if in_own_thread():
        return True
    try:
        frame: FrameType | None = sys._getframe(depth)
    except ValueError:
        return False
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if (
            name not in _ON_BEHALF
            and name not in through
            and not name.startswith("streamscope.pipeline.program.auto")
        ):
            return internal(name)
        frame = frame.f_back
    return False


def callable_name(fn: Any) -> str:
    """A stage name for a callable (``naming.function_name``)."""
    return function_name(fn)


def thread_who(t: threading.Thread) -> Who | None:
    """What a thread the program starts works as (``naming``); None for the standard
    library's and streamscope's own threads, and for an executor's, whose calls say it."""
    target = getattr(t, "_target", None)
    if target is None:
        cls = type(t)
        if cls is threading.Thread or internal(cls.__module__):
            return None
        return who_of_thread(t)
    if getattr(target, "__module__", None) == "concurrent.futures.thread":
        return None
    return None if internal(getattr(target, "__module__", None)) else who_of_thread(t)


@contextlib.contextmanager
def on_behalf_of(name: str) -> Iterator[None]:
    """The calling thread, no worker of a stage of the program's, does a piece of stage
    ``name``'s work meanwhile (a pool's result handler running the program's callback on a
    result of the pool's function): the queues it puts into and takes from have ``name`` at
    that end, and its time is no worker's of ``name`` (no tracker)."""
    before = getattr(thread_state, "behalf", None)
    thread_state.behalf = name
    try:
        yield
    finally:
        thread_state.behalf = before


def stage(end: str = "", queue: str = "") -> str | None:
    """The stage of the calling thread (None: not one of the program's), claimed at its first
    queue operation: at ``end`` (``in``: a get; ``out``: a put) of the queue ``queue``; the
    stage it works for meanwhile (``on_behalf_of``), if any."""
    behalf: str | None = getattr(thread_state, "behalf", None)
    if behalf is not None:
        return behalf
    name: str | None = getattr(thread_state, "stage", None)
    if name is not None or not end or in_own_thread():
        return name
    who = getattr(thread_state, "who", None)
    if who is None and threading.current_thread() is threading.main_thread():
        who = _main_who[0]
    if who is None:
        return None
    who = thread_state.who = refined(who)
    name = thread_state.stage = claim_stage(who, end, queue)
    if threading.current_thread() is not threading.main_thread():
        occupy(name)  # ``vacate`` when the thread ends (``installer``)
    return name


def thread_tracker(end: str = "", queue: str = "") -> native.StateTracker | None:
    """The calling thread's state tracker, made (and its worker declared) on its first put
    (``end`` ``out``) or get (``in``) on the queue ``queue``: from then on it is busy but
    while it waits on a queue."""
    tracker = native.bound_tracker()
    if tracker is not None or getattr(thread_state, "entered", False):
        return tracker
    if getattr(thread_state, "behalf", None) is not None:
        return None  # its time is not that stage's (``on_behalf_of``)
    with costs.spent():
        name = stage(end, queue)
        if name is None:
            return None
        thread_state.entered = True
        if not REGISTRY.active():
            return None
        REGISTRY.add_stage(name)
        tracker = REGISTRY.tracker(name)
    if tracker is not None:
        costs.one_more_thread()
        native.bind_tracker(tracker)
        tracker.set(State.BUSY)
    return tracker


def leave() -> None:
    """The calling thread's work is over: its stage's worker is in no state from now on
    (``NO_STATE``: not idle, gone)."""
    tracker = native.bound_tracker()
    if tracker is not None and getattr(thread_state, "entered", False):
        tracker.set(NO_STATE)
        native.bind_tracker(None)
    thread_state.entered = False


def start_afresh() -> None:
    """A new process's main thread starts with no tracker and no stage of its own: a forked
    child is a copy of the thread that started it, whose tracker writes into the parent's ring
    and must not be touched here."""
    native.bind_tracker(None)
    thread_state.entered = False
    thread_state.stage = thread_state.who = None
    _main_who[0] = None
    costs.start_afresh()


def work_as(who: Who | None) -> None:
    """From now on the calling thread works as ``who`` (its stage claimed at its next queue
    operation); a process's main thread too for the process."""
    thread_state.who = who
    thread_state.stage = None
    thread_state.entered = False
    if threading.current_thread() is threading.main_thread():
        _main_who[0] = who


def enter(who: Who, queue: str) -> native.StateTracker | None:
    """The calling thread works as ``who``, a worker of the pool that takes from ``queue``
    (a process pool's, an executor's): its stage claimed now, its tracker busy. The item that
    told it its stage is taken already: its service is timed from here (else its result's
    put read as a source's item, timed to the next take: a few µs)."""
    work_as(who)
    tracker = thread_tracker("in", queue)
    if tracker is not None:
        tracker.took()
    return tracker


__all__ = [
    "MAIN",
    "callable_name",
    "enter",
    "in_own_thread",
    "internal",
    "leave",
    "made_internally",
    "on_behalf_of",
    "own_thread",
    "stage",
    "start_afresh",
    "thread_state",
    "thread_tracker",
    "thread_who",
    "work_as",
]
