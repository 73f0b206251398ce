"""streamz streams as a program run as it is builds them: each node that applies the program's
function a stage, each hand-over between them a channel.

In: ``streamz.core`` as the program imports it while ``install`` is in force. Out: every node
with a function of the program's (``map(parse)``, ``sink(results.append)``, ``filter``,
``accumulate``, ``map_async(fetch)``…) is the stage named after it (as a pool's function is,
``processes.applied``: a coroutine's tasks, which ``map_async`` makes, are the same stage);
nodes without one (a ``Stream()`` source, ``buffer``, ``zip``…) pass their items on as the stage
that handed them in. A node hands an item to the next by calling it, so the hand-over is a
channel of no capacity (``src -> dst``, the nearest stages up and down): the item goes in and
out at once, the stage handing it blocked out while the next works on it (it can do nothing
else meanwhile), the next busy, then blocked in until its next item. A node's worker is the
thread it runs in (an event loop's for an asynchronous stream); a coroutine's node does its
work in the tasks it makes (workers of their own), so it only hands items on.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import inspect
import threading
import types
import weakref
from collections.abc import Iterator
from typing import Any

from streamscope.core import forksafe, native
from streamscope.core.records import State
from streamscope.pipeline.program.auto import tasks
from streamscope.pipeline.program.auto.channels import ProgramChannel
from streamscope.pipeline.program.auto.claims import claim_stage
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.processes import applied
from streamscope.pipeline.program.auto.stages import internal, stage, thread_tracker
from streamscope.pipeline.program.registry import REGISTRY

#: Per thread: the stage nodes at work now, innermost last (name, tracker); process-wide, as
#: the threads that run a stream's nodes are the process's.
_at_work = threading.local()
#: The hand-overs' channels, per (from, to) stage, made and used under ``_lock``:
#: process-wide, as the patched ``streamz.core`` is.
_channels: dict[tuple[str, str], ProgramChannel] = {}
_lock = forksafe.lock()


def _stack() -> list[tuple[str, native.StateTracker | None]]:
    stack: list[tuple[str, native.StateTracker | None]] | None = getattr(_at_work, "s", None)
    if stack is None:
        stack = _at_work.s = []
    return stack


def node_stage(node: Any) -> str | None:
    """The stage of a node that applies a function of the program's (None: no such node)."""
    try:
        return _stage_of[node]
    except (KeyError, TypeError):
        pass
    fn = getattr(node, "func", None) or getattr(node, "predicate", None)
    name = None
    if callable(fn) and _programs(getattr(fn, "__module__", None)):
        name = claim_stage(applied(fn), "task", "")
    with contextlib.suppress(TypeError):
        _stage_of[node] = name
    return name


def _programs(module: str | None) -> bool:
    """Whether a node's function is one the program gave it: its own, a library's, or a
    builtin's (``sink(results.append)``), not streamz's or streamscope's."""
    return (
        not module
        or module.partition(".")[0] == "builtins"
        or not (internal(module) or module.partition(".")[0] == "streamz")
    )


#: Each node's stage, found once (the claim table is read to name it); process-wide, as the
#: program's streams are.
_stage_of: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()


def _caller() -> tuple[str | None, native.StateTracker | None]:
    """The stage handing an item on now, and its worker's tracker: the innermost stage node at
    work in this thread, else the worker whose ``emit`` this is (``_source``: it may run on
    the stream's loop, in a task of streamz's), else the program's asyncio task running, else
    the thread (none for a task of a library's)."""
    stack = _stack()
    if stack:
        return stack[-1]
    source = _source.get()
    if source is not None:
        return source
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is not None:
        return tasks.current_worker("out")
    return stage("out"), thread_tracker("out")


#: The worker emitting into a stream now (``Stream.emit``), where its nodes run.
_source: contextvars.ContextVar[tuple[str | None, native.StateTracker | None] | None] = (
    contextvars.ContextVar("streamscope_stream_source", default=None)
)


def _upstream(node: Any, depth: int = 16) -> str | None:
    """The stage an item a node emits comes from: the node's own, else the nearest one up
    the stream (through nodes that only pass items on: ``buffer``, ``zip``…)."""
    name = node_stage(node)
    if name is not None or depth <= 0:
        return name
    for up in getattr(node, "upstreams", ()) or ():
        name = _upstream(up, depth - 1)
        if name is not None:
            return name
    return None


def _hand(src: str | None, dst: str) -> None:
    """An item from stage ``src`` to ``dst``: in and out of their channel at once."""
    if src is None or src == dst or not REGISTRY.active():
        return
    with _lock:
        ch = _channels.get((src, dst))
        if ch is None:
            ch = _channels[src, dst] = ProgramChannel(0)
            ch.saw("tail", src)
            ch.saw("head", dst)
        ch.n_in += 1
        ch.n_out += 1
        if ch.tail is not None:
            ch.tail.record(ch.n_in)
        if ch.head is not None:
            ch.head.record(ch.n_out)


@contextlib.contextmanager
def _working(dst: str, src_tracker: native.StateTracker | None) -> Iterator[None]:
    """Stage ``dst``'s worker in this thread busy while its node works on an item, the stage
    that handed it in blocked out meanwhile; ``dst`` then waits for its next item."""
    mine = REGISTRY.tracker(dst) if REGISTRY.active() else None
    before = src_tracker.set(State.BLOCKED_OUT) if src_tracker is not None else 0
    if mine is not None:
        REGISTRY.add_stage(dst)
        mine.set(State.BUSY)
    stack = _stack()
    stack.append((dst, mine))
    try:
        yield
    finally:
        stack.pop()
        if mine is not None:
            mine.set(State.BLOCKED_IN)
        if src_tracker is not None:
            src_tracker.set(before)


def _emit(standard: Any) -> Any:
    """``Stream._emit``: each downstream node's ``update`` as the hand-over above. The node
    emitting is a stage itself, or passes on for the stage that handed it the item."""

    @functools.wraps(standard)
    def emit(self: Any, x: Any, metadata: Any = None) -> Any:
        if not REGISTRY.active():
            return standard(self, x, metadata)
        return standard(_Handing(self), x, metadata)

    return emit


class _Handing:
    """A node as its ``_emit`` sees itself: its downstreams' ``update`` calls handed over
    (``_Downstream``), every other attribute the node's own."""

    __slots__ = ("_node",)

    def __init__(self, node: Any) -> None:
        object.__setattr__(self, "_node", node)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._node, name)
        if name == "downstreams":
            src = _upstream(self._node)
            return [_Downstream(d, src) for d in value]
        return value

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self._node, name, value)


class _Downstream:
    """A downstream node whose ``update`` takes an item from the stage ``src`` (None: the
    caller's, ``_caller``)."""

    __slots__ = ("node", "src")

    def __init__(self, node: Any, src: str | None) -> None:
        self.node, self.src = node, src

    def update(self, x: Any, who: Any = None, metadata: Any = None) -> Any:
        node = self.node
        dst = node_stage(node)
        if dst is None:
            return node.update(x, who=_who(who), metadata=metadata)
        src, tracker = _caller()
        _hand(self.src or src, dst)
        if inspect.iscoroutinefunction(getattr(node, "func", None)):
            return node.update(x, who=_who(who), metadata=metadata)
        with _working(dst, tracker):
            return node.update(x, who=_who(who), metadata=metadata)


def _who(who: Any) -> Any:
    return who._node if isinstance(who, _Handing) else who


def _emitting(standard: Any) -> Any:
    """``Stream.emit``: the worker emitting (the main thread, a task) is blocked out until the
    stream has taken the item, as a put into a full queue is: while its nodes work on it
    (here, or on the stream's loop, ``sync`` waiting), and on an asynchronous stream until
    the future it returns is done (``await source.emit(x)``, as streamz's documentation
    writes it: a ``map_async`` whose tasks are all at work takes no more)."""

    @functools.wraps(standard)
    def emit(self: Any, x: Any, asynchronous: bool = False, metadata: Any = None) -> Any:
        if not REGISTRY.active():
            return standard(self, x, asynchronous=asynchronous, metadata=metadata)
        source = _stack()[-1] if _stack() else _caller()
        tracker = source[1]
        before = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
        token = _source.set(source)
        try:
            out = standard(self, x, asynchronous=asynchronous, metadata=metadata)
        except BaseException:
            if tracker is not None:
                tracker.set(before)
            raise
        finally:
            _source.reset(token)
        if tracker is not None:
            if asyncio.isfuture(out) and not out.done():
                out.add_done_callback(lambda _: tracker.set(before))
            else:
                tracker.set(before)
        return out

    return emit


def stream_nodes(module: types.ModuleType) -> Patches:
    """``streamz.core``'s hand-overs (``POLLING``), for a session of its own."""
    with _lock:
        _channels.clear()
        _stage_of.clear()
    return Patches({(module.Stream, "_emit"): _emit, (module.Stream, "emit"): _emitting})


__all__ = ["node_stage", "stream_nodes"]
