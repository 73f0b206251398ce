"""Drop-in instrumentation for programs that already use threads and queues.

In: ``streamscope.Queue(maxsize, src=..., dst=...)`` where a program had ``queue.Queue(maxsize)``,
``streamscope.MPQueue`` for ``multiprocessing.Queue``, and ``with streamscope.stage("name"):``
around a stage's work. Out: the same ring records a ``Pipeline`` produces, once a
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

from streamscope.core import native
from streamscope.core.errors import PipelineError
from streamscope.core.records import Kind, State
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.pipeline.channel import ThreadChannel
from streamscope.probes.taps import COST_CALL, Recorder, RingTap, make_tracker

P = ParamSpec("P")
R = TypeVar("R")


class Registry:
    """What a program declared: stage names and instrumented queues, in creation order; while a
    session is active, the probes it needs and the recorder of each process that records."""

    def __init__(self) -> None:
        self.stages: dict[str, None] = {}
        self.queues: dict[str, Queue | MPQueue] = {}
        self.probes: tuple[ProbeInfo, ...] = ()
        self.directory: str | None = None
        self.capacity = 0
        self._state_probe: dict[str, int] = {}
        #: Per process (pid): its recorder and its stages' trackers.
        self._recorders: dict[int, Recorder] = {}
        self._trackers: dict[tuple[int, str], native.StateTracker] = {}
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

    def recorder(self) -> Recorder | None:
        """This process's recorder while a session is active (made on first use in a child)."""
        if not self.probes:
            return None
        pid = os.getpid()
        rec = self._recorders.get(pid)
        if rec is None:
            with self.lock:
                rec = self._recorders.setdefault(
                    pid, Recorder(self.directory, capacity=self.capacity)
                )
        return rec

    def tracker(self, stage: str) -> native.StateTracker | None:
        """This process's tracker of ``stage`` when a query watches it (a forked child gets one
        of its own: the parent's ring is the parent's)."""
        probe = self._state_probe.get(stage)
        if probe is None:
            return None
        key = (os.getpid(), stage)
        tracker = self._trackers.get(key)
        if tracker is None:
            rec = self.recorder()
            if rec is None:
                return None
            with self.lock:
                tracker = self._trackers.get(key)
                if tracker is None:
                    tap = rec.tap(probe, Kind.STATE, cost=COST_CALL)
                    tracker = self._trackers[key] = make_tracker(stage, tap)
        return tracker

    def activate(self, probes: tuple[ProbeInfo, ...], directory: str | None, capacity: int) -> None:
        """Turn on exactly the probes a session needs, recording into ``directory``."""
        with self.lock:
            self.probes = probes
            self.directory = directory
            self.capacity = capacity
            self._state_probe = {p.target: p.id for p in probes if p.kind == "state"}
            for p in probes:
                if p.kind in ("tail", "head"):
                    self.queues[p.target].attach(p.kind, p.id)

    def deactivate(self) -> None:
        with self.lock:
            for q in self.queues.values():
                q.detach()
            self._state_probe = {}
            self._trackers.clear()
            self._recorders.clear()
            self.probes = ()
            self.directory = None


REGISTRY = Registry()


class Queue(ThreadChannel, queue.Queue[Any]):  # type: ignore[override]
    """``queue.Queue`` with the same interface (and an instance of it), monitored when a
    session's queries need it: the native FIFO records its own insertions and removals, and a
    thread inside ``streamscope.stage`` is marked blocked while it really waits on it.

    ``src`` and ``dst`` name the stages that put and get (they become the channel ``src -> dst``).
    """

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
        self._probes: dict[str, int] = {}
        self._taps: dict[tuple[int, str], RingTap] = {}
        REGISTRY.add_queue(self)

    def attach(self, end: str, probe: int) -> None:
        self._probes[end] = probe

    def detach(self) -> None:
        self._probes.clear()
        self._taps.clear()

    def _tap(self, end: str) -> RingTap | None:
        """This process's tap for ``end`` (made on first use, so forked children get their own)."""
        probe = self._probes.get(end)
        if probe is None:
            return None
        key = (os.getpid(), end)
        tap = self._taps.get(key)
        if tap is None:
            rec = REGISTRY.recorder()
            if rec is None:
                return None
            tap = rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET, cost=COST_CALL)
            self._taps[key] = tap
        return tap

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        tracker = native.bound_tracker()
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
                tap.ring.record(self._seq_in.value)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        tracker = native.bound_tracker()
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
                tap.ring.record(self._seq_out.value)
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
