"""Drop-in instrumentation for programs that already use threads and queues.

In: ``streamscope.Queue(maxsize, src=..., dst=...)`` where a program had ``queue.Queue(maxsize)``,
``streamscope.MPQueue`` for ``multiprocessing.Queue``, and ``with streamscope.stage("name"):``
around a stage's work. Out: the same ring records a ``Pipeline`` produces, once a
``streamscope.monitor(...)`` session activates the probes its queries need.
"""

from __future__ import annotations

import contextlib
import functools
import json
import multiprocessing as mp
import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any, ParamSpec, TypeVar

from streamscope.core import native
from streamscope.core.errors import ConfigError, PipelineError
from streamscope.core.records import Kind, State
from streamscope.core.rings import declare, next_probe_ids, set_next_probe_id
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.pipeline.channel import ThreadChannel
from streamscope.probes.taps import COST_CALL, Recorder, RingTap, make_tracker

P = ParamSpec("P")
R = TypeVar("R")


#: Where a process the program starts later (``spawn``) finds the active session.
SESSION_ENV = "STREAMSCOPE_DROPIN_SESSION"


def taps_for(
    watches: list[dict[str, Any]],
    stage: str | None = None,
    channel: ChannelInfo | None = None,
    probe: str | None = None,
) -> set[str]:
    """The probe kinds a stage, channel or value probe (``STAGE.NAME``) needs for the
    session's queries (``watches``, as ``query.compile.watches`` gives them)."""
    kinds: set[str] = set()
    for w in watches:
        if "probe" in w:
            hit = probe is not None and fnmatchcase(probe, w["probe"])
        elif "stage" in w:
            hit = stage is not None and fnmatchcase(stage, w["stage"])
        else:
            hit = channel is not None and (
                fnmatchcase(channel.src, w["src"]) and fnmatchcase(channel.dst, w["dst"])
            )
        if hit:
            kinds.update(w["kinds"])
    return kinds


class Registry:
    """What a program declared: instrumented queues and stage names, in creation order; while a
    session is active, the probes it needs and the recorder of each process that records.

    A stage exists for the monitor once a thread works in it (``with stage(name)``): each
    thread of each process that does gets a state probe of its own (a worker), declared to the
    monitor then, on the resource it runs on. Queues made while the session runs are declared
    the same way. Processes started later find the session in their environment."""

    def __init__(self) -> None:
        self.stages: dict[str, None] = {}
        self.queues: dict[str, Queue | MPQueue] = {}
        self.probes: tuple[ProbeInfo, ...] = ()
        self.directory: str | None = None
        self.capacity = 0
        self.watches: list[dict[str, Any]] = []
        self.owner = 0  # the pid that activated the session
        #: Per process (pid): its recorder. Per worker (pid, thread, stage): its tracker.
        self._recorders: dict[int, Recorder] = {}
        self._trackers: dict[tuple[int, object, str], native.StateTracker | None] = {}
        self._env_checked = 0
        self.lock = threading.RLock()

    def add_stage(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a stage needs a name (a non-empty str), got {name!r}")
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
            if self.active():
                self._declare_queue(q)

    def channel_info(self, q: Queue | MPQueue) -> ChannelInfo:
        transport = "process" if isinstance(q, MPQueue) else "thread"
        return ChannelInfo(q.name, q.src, q.dst, q.capacity, transport)

    def topology(self, probes: tuple[ProbeInfo, ...] = ()) -> Topology:
        """The queues so far; no stage (a stage appears once a thread works in it)."""
        return Topology(
            name="program",
            resources=(ResourceInfo("main", "thread"),),
            channels=tuple(self.channel_info(q) for q in self.queues.values()),
            probes=probes,
        )

    def active(self) -> bool:
        """A session is active for this process (a process spawned by the program reads it
        from its environment the first time it asks)."""
        if self.directory is not None:
            return True
        pid = os.getpid()
        if self._env_checked != pid:
            self._env_checked = pid
            found = os.environ.get(SESSION_ENV)
            if found:
                with contextlib.suppress(ValueError, KeyError, TypeError):
                    d = json.loads(found)
                    self.directory, self.capacity = str(d["dir"]), int(d["capacity"])
                    self.watches, self.owner = list(d["watches"]), int(d["owner"])
        return self.directory is not None

    def recorder(self) -> Recorder | None:
        """This process's recorder while a session is active (made on first use in a child)."""
        if not self.active():
            return None
        pid = os.getpid()
        rec = self._recorders.get(pid)
        if rec is None:
            with self.lock:
                rec = self._recorders.setdefault(
                    pid, Recorder(self.directory, capacity=self.capacity)
                )
        return rec

    def resource(self) -> ResourceInfo:
        """Where the calling thread runs: the program's own process, or a child of it."""
        pid = os.getpid()
        if pid == self.owner:
            return ResourceInfo("main", "thread")
        return ResourceInfo(f"{mp.current_process().name} (pid {pid})", "process")

    def _role(self, stage: str) -> str:
        srcs = {q.src for q in self.queues.values()}
        dsts = {q.dst for q in self.queues.values()}
        if stage in srcs and stage not in dsts:
            return "source"
        return "sink" if stage in dsts and stage not in srcs else "stage"

    def tracker(
        self, stage: str, worker: object = None, resource: ResourceInfo | None = None
    ) -> native.StateTracker | None:
        """The calling thread's tracker of ``stage`` while a session is active: made, and the
        worker declared to the monitor, the first time this thread works in it (None when no
        query watches the stage). ``worker``: another worker than the thread (an asyncio task,
        on ``resource``, its event loop)."""
        key = (os.getpid(), threading.get_ident() if worker is None else worker, stage)
        try:
            return self._trackers[key]
        except KeyError:
            pass
        with self.lock:
            if key in self._trackers:
                return self._trackers[key]
            tracker = None
            rec = self.recorder()
            if rec is not None and self.directory is not None:
                res = resource or self.resource()
                probes: tuple[ProbeInfo, ...] = ()
                if "state" in taps_for(self.watches, stage=stage):
                    probes = (ProbeInfo(next_probe_ids(self.directory, 1), "state", stage),)
                found = Topology(
                    "", resources=(res,), stages=(StageInfo(stage, res.name, self._role(stage)),),
                    probes=probes,
                )  # fmt: skip
                declare(self.directory, found)
                if probes:
                    tracker = make_tracker(stage, rec.tap(probes[0].id, Kind.STATE, cost=COST_CALL))
            self._trackers[key] = tracker
            return tracker

    def _declare_queue(self, q: Queue | MPQueue) -> None:
        """A queue made while the session runs: its probes, declared, then attached."""
        assert self.directory is not None
        info = self.channel_info(q)
        kinds = [k for k in ("tail", "head") if k in taps_for(self.watches, channel=info)]
        if not kinds:
            found = Topology("", channels=(info,))
            declare(self.directory, found)
            return
        first = next_probe_ids(self.directory, len(kinds))
        probes = tuple(ProbeInfo(first + i, k, q.name) for i, k in enumerate(kinds))
        declare(self.directory, Topology("", channels=(info,), probes=probes))
        for p in probes:
            q.attach(p.kind, p.id)

    def activate(
        self,
        probes: tuple[ProbeInfo, ...],
        directory: str,
        capacity: int,
        watches: list[dict[str, Any]],
    ) -> None:
        """Turn on the probes a session needs, recording into ``directory``; stages and queues
        that appear later get probes numbered after these."""
        with self.lock:
            self.probes = probes
            self.directory = directory
            self.capacity = capacity
            self.watches = watches
            self.owner = os.getpid()
            set_next_probe_id(directory, max((p.id for p in probes), default=0) + 1)
            os.environ[SESSION_ENV] = json.dumps(
                {"dir": directory, "capacity": capacity, "watches": watches, "owner": self.owner}
            )
            for p in probes:
                if p.kind in ("tail", "head"):
                    self.queues[p.target].attach(p.kind, p.id)

    def deactivate(self) -> None:
        with self.lock:
            os.environ.pop(SESSION_ENV, None)
            for q in self.queues.values():
                q.detach()
            self._trackers.clear()
            self._recorders.clear()
            self.probes = ()
            self.directory = None
            self.watches = []
            self._env_checked = os.getpid()


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


class MPQueueFace(ABC):
    """What a monitored ``multiprocessing`` queue shows besides ``put`` and ``get``, over the
    plain queue ``_q`` it wraps and its shared counts (``MPQueue`` and the instrumented queue of
    a program run as it is)."""

    _q: Any
    _seq_in: Any
    _seq_out: Any
    capacity: int

    @abstractmethod
    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None: ...

    @abstractmethod
    def get(self, block: bool = True, timeout: float | None = None) -> Any: ...

    _free: Any

    def _take(self, tracker: native.StateTracker | None, block: bool, timeout: float | None) -> Any:
        """The next item of ``_q``, the waiting thread marked blocked in only while it waits."""
        if tracker is None or not block:
            return self._q.get(block, timeout)
        try:
            return self._q.get(False)
        except queue.Empty:
            prev = tracker.set(State.BLOCKED_IN)
            try:
                return self._q.get(True, timeout)
            finally:
                tracker.set(prev)

    def _taken(self, ring: Any) -> None:
        """An item was taken: count it (recorded into ``ring`` if any) and give its place back."""
        with self._seq_out.get_lock():
            self._seq_out.value += 1
            if ring is not None:
                ring.record(self._seq_out.value)
        if self._free is not None:
            self._free.release()

    def put_nowait(self, item: Any) -> None:
        self.put(item, False)

    def get_nowait(self) -> Any:
        return self.get(False)

    def qsize(self) -> int:
        return int(self._seq_in.value - self._seq_out.value)

    def empty(self) -> bool:
        return bool(self._q.empty())

    def full(self) -> bool:
        return self.capacity > 0 and self.qsize() >= self.capacity

    def close(self) -> None:
        self._q.close()

    def join_thread(self) -> None:
        self._q.join_thread()

    def cancel_join_thread(self) -> None:
        self._q.cancel_join_thread()


class MPQueue(MPQueueFace):
    """``multiprocessing.Queue`` monitored from every process that uses it.

    Its occupancy is the number of items put and not yet taken: an insertion is recorded
    after a free place is taken and before the item can be taken, a removal after the item is
    taken and before its place is given back, so it never exceeds ``maxsize``. Sequence numbers
    live in shared memory and are taken with the time under one lock per end, so records from
    different processes still say exactly how many items were in the queue. Pass it to the
    processes that use it (forked or spawned) as ``multiprocessing.Queue`` is passed.
    """

    def __init__(
        self, maxsize: int = 0, *, src: str, dst: str, name: str | None = None, ctx: Any = None
    ) -> None:
        if not isinstance(maxsize, int) or maxsize < 0:
            raise ConfigError(f"MPQueue maxsize must be an int >= 0, got {maxsize!r}")
        ctx = ctx or mp.get_context()
        self._q = ctx.Queue()  # unbounded: ``_free`` bounds it, so the records can
        self._free = ctx.BoundedSemaphore(maxsize) if maxsize > 0 else None
        self.name = name or f"{src} -> {dst}"
        self.src, self.dst = src, dst
        self.capacity = maxsize
        self._seq_in = ctx.Value("q", 0)
        self._seq_out = ctx.Value("q", 0)
        self._probes: dict[str, int] = {}
        self._taps: dict[tuple[int, str], RingTap] = {}
        REGISTRY.add_queue(self)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_taps"] = {}  # rings are per process: a spawned child makes its own
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def attach(self, end: str, probe: int) -> None:
        self._probes[end] = probe

    def detach(self) -> None:
        self._probes.clear()
        self._taps.clear()

    def _tap(self, end: str) -> RingTap | None:
        """This process's tap for ``end`` (made on first use, so children get their own)."""
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

    def _take_place(self, block: bool, timeout: float | None) -> None:
        free = self._free
        if free is None:
            return
        if free.acquire(False):
            return
        if not block:
            raise queue.Full
        tracker = native.bound_tracker()
        prev = tracker.set(State.BLOCKED_OUT) if tracker is not None else 0
        try:
            if not free.acquire(True, timeout):
                raise queue.Full
        finally:
            if tracker is not None:
                tracker.set(prev)

    def put(self, item: Any, block: bool = True, timeout: float | None = None) -> None:
        self._take_place(block, timeout)
        tap = self._tap("tail")
        with self._seq_in.get_lock():
            self._seq_in.value += 1
            if tap is not None:
                tap.ring.record(self._seq_in.value)
            self._q.put(item)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        item = self._take(native.bound_tracker(), block, timeout)
        tap = self._tap("head")
        self._taken(tap.ring if tap is not None else None)
        return item


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
