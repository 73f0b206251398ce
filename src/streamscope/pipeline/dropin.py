"""Drop-in instrumentation for programs that already use threads and queues.

In: ``streamscope.Queue(maxsize, src=..., dst=...)`` where a program had ``queue.Queue(maxsize)``,
``streamscope.MPQueue`` for ``multiprocessing.Queue``, and ``with streamscope.stage("name"):``
around a stage's work. Out: the same tap and state records a ``Pipeline`` produces, once a
``streamscope.monitor(...)`` session activates the probes its queries need.
"""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import queue
import threading
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from streamscope.core.clock import host_now_ticks
from streamscope.core.errors import PipelineError
from streamscope.core.records import Kind, State
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.pipeline.channel import ThreadChannel
from streamscope.probes.taps import LockedTap, RingTap, StateTracker, Tap

P = ParamSpec("P")
R = TypeVar("R")

_local = threading.local()


class _LockedTracker(StateTracker):
    """A tracker that several threads may share (drop-in stages are not always one thread)."""

    __slots__ = ("lock",)

    def __init__(self, name: str, tap: RingTap) -> None:
        super().__init__(name, tap, host_now_ticks)
        self.lock = threading.Lock()

    def set(self, state: State) -> State:
        with self.lock:
            return super().set(state)


class Registry:
    """What a program declared: stage names and instrumented queues, in creation order."""

    def __init__(self) -> None:
        self.stages: dict[str, None] = {}
        self.queues: dict[str, Queue | MPQueue] = {}
        self.trackers: dict[str, StateTracker] = {}
        self.taps: list[Tap] = []
        self.probes: tuple[ProbeInfo, ...] = ()
        self.on_tap: Callable[[Tap], None] | None = None
        self.lock = threading.RLock()

    def add_stage(self, name: str) -> None:
        if name not in self.stages:
            with self.lock:
                self.stages.setdefault(name, None)

    def add_queue(self, q: Queue | MPQueue) -> None:
        with self.lock:
            if q.name in self.queues and self.queues[q.name] is not q:
                raise PipelineError(
                    f"a queue named {q.name!r} exists already; pass name= to tell them apart"
                )
            self.add_stage(q.src)
            self.add_stage(q.dst)
            self.queues[q.name] = q

    def topology(self, probes: tuple[ProbeInfo, ...] = ()) -> Topology:
        channels = []
        for q in self.queues.values():
            transport = "process" if isinstance(q, MPQueue) else "thread"
            channels.append(ChannelInfo(q.name, q.src, q.dst, q.capacity, transport))
        srcs = {c.src for c in channels}
        dsts = {c.dst for c in channels}

        def role(s: str) -> str:
            return "source" if s not in dsts else "sink" if s not in srcs else "stage"

        return Topology(
            name="program",
            resources=(ResourceInfo("main", "thread"),),
            stages=tuple(StageInfo(s, "main", role(s)) for s in self.stages),
            channels=tuple(channels),
            probes=probes,
        )

    def activate(
        self, probes: tuple[ProbeInfo, ...], on_tap: Callable[[Tap], None], capacity: int
    ) -> None:
        """Turn on exactly the probes a session needs; ``on_tap`` hands each to the agent."""
        with self.lock:
            self.probes = probes
            self.on_tap = on_tap
            for p in probes:
                if p.kind == "state":
                    tracker = _LockedTracker(p.target, RingTap(p.id, Kind.STATE, capacity))
                    self.trackers[p.target] = tracker
                    on_tap(tracker.tap)
                elif p.kind in ("tail", "head"):
                    self.queues[p.target].attach(p.kind, p.id, capacity, on_tap)

    def deactivate(self) -> None:
        with self.lock:
            for q in self.queues.values():
                q.detach()
            self.trackers.clear()
            self.probes = ()
            self.on_tap = None


REGISTRY = Registry()


def _tracker() -> StateTracker | None:
    return getattr(_local, "tracker", None)


class Queue(ThreadChannel):
    """``queue.Queue`` with the same interface, monitored when a session's queries need it.

    ``src`` and ``dst`` name the stages that put and get (they become the channel ``src -> dst``).
    """

    def __init__(self, maxsize: int = 0, *, src: str, dst: str, name: str | None = None) -> None:
        super().__init__(maxsize, name=name or f"{src} -> {dst}")
        self.src, self.dst = src, dst
        self.capacity = maxsize
        REGISTRY.add_queue(self)

    def attach(self, end: str, probe: int, capacity: int, on_tap: Callable[[Tap], None]) -> None:
        tap = LockedTap(probe, Kind.PUT if end == "tail" else Kind.GET, self.mutex, capacity)
        setattr(self, end, tap)
        on_tap(tap)

    def detach(self) -> None:
        self.tail = self.head = None

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        tracker = _tracker()
        if tracker is None or not block:
            super().put(item, block, timeout)
            return
        try:
            super().put(item, False)
        except queue.Full:
            prev = tracker.set(State.BLOCKED_OUT)
            try:
                super().put(item, True, timeout)
            finally:
                tracker.set(prev)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        tracker = _tracker()
        if tracker is None or not block:
            return super().get(block, timeout)
        try:
            return super().get(False)
        except queue.Empty:
            prev = tracker.set(State.BLOCKED_IN)
            try:
                return super().get(True, timeout)
            finally:
                tracker.set(prev)


class MPQueue:
    """``multiprocessing.Queue`` monitored from every process that uses it.

    Sequence numbers live in shared memory and are taken with the time under one lock per end,
    so records from different processes still say exactly how many items were in the queue.
    Create it before starting (forking) the processes that use it.
    """

    def __init__(
        self, maxsize: int = 0, *, src: str, dst: str, name: str | None = None, ctx: Any = None
    ) -> None:
        ctx = ctx or mp.get_context("fork")
        self._q = ctx.Queue(maxsize)
        self.name = name or f"{src} -> {dst}"
        self.src, self.dst = src, dst
        self.capacity = maxsize
        self._seq_in = ctx.Value("q", 0)
        self._seq_out = ctx.Value("q", 0)
        self._probes: dict[str, tuple[int, int]] = {}
        self._taps: dict[tuple[int, str], RingTap] = {}
        REGISTRY.add_queue(self)

    def attach(self, end: str, probe: int, capacity: int, on_tap: Callable[[Tap], None]) -> None:
        self._probes[end] = (probe, capacity)

    def detach(self) -> None:
        self._probes.clear()
        self._taps.clear()

    def _tap(self, end: str) -> RingTap | None:
        """This process's tap for ``end`` (made on first use, so forked children get their own)."""
        spec = self._probes.get(end)
        if spec is None:
            return None
        key = (os.getpid(), end)
        tap = self._taps.get(key)
        if tap is None:
            tap = RingTap(spec[0], Kind.PUT if end == "tail" else Kind.GET, spec[1])
            self._taps[key] = tap
            on_tap = REGISTRY.on_tap
            if on_tap is not None:
                on_tap(tap)
        return tap

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        tracker = _tracker()
        if tracker is not None and block:
            try:
                self._q.put(item, False)
            except queue.Full:
                prev = tracker.set(State.BLOCKED_OUT)
                try:
                    self._q.put(item, True, timeout)
                finally:
                    tracker.set(prev)
        else:
            self._q.put(item, block, timeout)
        tap = self._tap("tail")
        with self._seq_in.get_lock():
            self._seq_in.value += 1
            if tap is not None:
                tap.record(host_now_ticks(), self._seq_in.value)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        tracker = _tracker()
        if tracker is not None and block:
            try:
                item = self._q.get(False)
            except queue.Empty:
                prev = tracker.set(State.BLOCKED_IN)
                try:
                    item = self._q.get(True, timeout)
                finally:
                    tracker.set(prev)
        else:
            item = self._q.get(block, timeout)
        tap = self._tap("head")
        with self._seq_out.get_lock():
            self._seq_out.value += 1
            if tap is not None:
                tap.record(host_now_ticks(), self._seq_out.value)
        return item

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get_nowait(self) -> Any:
        return self.get(False)

    def qsize(self) -> int:
        return int(self._q.qsize())

    def empty(self) -> bool:
        return bool(self._q.empty())

    def close(self) -> None:
        self._q.close()

    def join_thread(self) -> None:
        self._q.join_thread()


class stage:  # noqa: N801 - used like a function: ``with stage("x"):`` / ``@stage("x")``
    """Marks the current thread as working for stage ``name``: busy inside, idle after.

    While inside, monitored queues record when this stage blocks on them.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        REGISTRY.add_stage(name)
        self._saved: list[tuple[StateTracker | None, State]] = []

    def __enter__(self) -> stage:
        tracker = REGISTRY.trackers.get(self.name)
        prev = _tracker()
        _local.tracker = tracker
        state = tracker.set(State.BUSY) if tracker is not None else State.IDLE
        self._saved.append((prev, state))
        return self

    def __exit__(self, *exc: object) -> None:
        prev_tracker, prev_state = self._saved.pop()
        tracker = REGISTRY.trackers.get(self.name)
        if tracker is not None:
            tracker.set(prev_state)
        _local.tracker = prev_tracker

    def __call__(self, fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
            with stage(self.name):
                return fn(*args, **kwargs)

        return wrapper


__all__ = ["REGISTRY", "MPQueue", "Queue", "Registry", "stage"]
