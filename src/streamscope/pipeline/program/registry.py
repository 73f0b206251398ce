"""What a drop-in program declared, and the session that records it.

In: the queues and stage names a program makes, and a session's probes, ring directory and
queries (``Registry.activate``). Out: the program's topology so far, each process's recorder and
each worker's state tracker, declared to the monitor the first time it works.
"""

from __future__ import annotations

import collections
import contextlib
import json
import multiprocessing as mp
import os
import threading
import time
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Protocol

from streamscope.core import forksafe, native
from streamscope.core.errors import ConfigError, PipelineError
from streamscope.core.records import NO_STATE, Kind
from streamscope.core.rings import close_journal, declare, next_probe_ids, set_next_probe_id
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.probes.stacks import ProcessStacks
from streamscope.probes.taps import COST_CALL, Recorder, RingTap, make_tracker

#: Where a process the program starts later (``spawn``) finds the active session.
SESSION_ENV = "STREAMSCOPE_DROPIN_SESSION"
#: The file, in the session's ring directory, where the program's uncaught exception is told
#: (``Type: message``) to the process that started it.
RAISED = "program.raised"
#: The file, in the session's ring directory, where the program's process lists what it used
#: that streamscope does not watch (``UNWATCHED``), one per line, as it ends.
USED = "program.used"
#: The file (its name, then the process's pid) each of the program's processes tells what
#: watching its threads and queues cost in (``auto.costs``).
SETUP_PREFIX = "setup."


def taps_for(
    watches: list[dict[str, Any]],
    stage: str | None = None,
    channel: ChannelInfo | None = None,
    probe: str | None = None,
) -> set[str]:
    """The probe kinds a stage, channel or value probe (``STAGE.NAME``) needs for the
    session's queries (``watches``, as ``query.follow.watches`` gives them)."""
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


class DeclaredQueue(Protocol):
    """A queue the program declared (``dropin.Queue``, ``MPQueue``): the channel it is, and
    its ends' probes attached and detached as sessions come and go."""

    @property
    def name(self) -> str: ...
    @property
    def src(self) -> str: ...
    @property
    def dst(self) -> str: ...
    @property
    def capacity(self) -> int: ...
    @property
    def transport(self) -> str: ...

    def attach(self, end: str, probe: int) -> None: ...

    def detach(self) -> None: ...


#: How long a thread's tracker waits for the next thread of its stage before it is retired, s.
VACANT_FOR_S = 0.2


class Registry:
    """What a program declared: instrumented queues and stage names, in creation order; while a
    session is active, the probes it needs and the recorder of each process that records.

    A stage exists for the monitor once a thread works in it (``with stage(name)``): each
    thread of each process that does gets a state probe of its own (a worker), declared to the
    monitor then, on the resource it runs on. Queues made while the session runs are declared
    the same way. Processes started later find the session in their environment."""

    def __init__(self) -> None:
        self.stages: dict[str, None] = {}
        self.queues: dict[str, DeclaredQueue] = {}
        self.probes: tuple[ProbeInfo, ...] = ()
        self.directory: str | None = None
        self.capacity = 0
        self.watches: list[dict[str, Any]] = []
        self.owner = 0  # the pid that activated the session
        #: The stack sampling period asked for (ns; 0: stacks are not sampled), and each
        #: process's sampler (by pid), made when its first worker is.
        self.stacks_ns = 0
        self._stacks: dict[int, ProcessStacks] = {}
        #: How each program stage's name was found (``pipeline.program.auto.naming``), by stage.
        self.named_by: dict[str, str] = {}
        #: Per process (pid): its recorder. Per worker (pid, thread, stage): its tracker.
        self._recorders: dict[int, Recorder] = {}
        self._trackers: dict[tuple[int, object, str], native.StateTracker | None] = {}
        #: The trackers' keys of each thread (pid, ident), and each tracker's tap (by id):
        #: what a thread that ends lets go of.
        self._threads: dict[tuple[int, object], list[tuple[int, object, str]]] = {}
        self._tracker_taps: dict[int, RingTap] = {}
        #: Trackers of threads that ended, by (pid, stage), with when: the next thread of the
        #: stage in the process takes one up (its worker goes on, idle meanwhile); one left for
        #: ``VACANT_FOR_S`` is retired. A program starting a thread per piece of work has as
        #: many workers as threads at once, not one per thread it ever started.
        self._vacant: dict[tuple[int, str], list[tuple[native.StateTracker, float]]] = {}
        #: The same trackers in the order they were left (oldest first): those past
        #: ``VACANT_FOR_S`` are found at its front, however many stages there are.
        self._vacated: collections.deque[tuple[float, tuple[int, str], native.StateTracker]]
        self._vacated = collections.deque()
        self._env_checked = 0
        self.lock = forksafe.rlock()

    def add_stage(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ConfigError(f"a stage needs a name (a non-empty str), got {name!r}")
        if name not in self.stages:
            with self.lock:
                self.stages.setdefault(name, None)

    def add_queue(self, q: DeclaredQueue) -> None:
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

    def channel_info(self, q: DeclaredQueue) -> ChannelInfo:
        return ChannelInfo(q.name, q.src, q.dst, q.capacity, q.transport)

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
                    self.stacks_ns = int(d.get("stacks_ns", 0))
        return self.directory is not None

    def adopt(self) -> None:
        """The calling process is the program's own (``streamscope run prog.py`` starts it):
        its threads run on the resource ``main``, and the processes it starts are its
        children."""
        if self.active():
            self.owner = os.getpid()
            os.environ[SESSION_ENV] = self._session_env()

    def _session_env(self) -> str:
        return json.dumps(
            {"dir": self.directory, "capacity": self.capacity, "watches": self.watches,
             "owner": self.owner, "stacks_ns": self.stacks_ns}
        )  # fmt: skip

    def recorder(self) -> Recorder | None:
        """This process's recorder while a session is active (made on first use in a child)."""
        if not self.active():
            return None
        pid = os.getpid()
        rec = self._recorders.get(pid)
        if rec is None:
            with self.lock:  # (its rings in slabs: a program makes them by the hundred)
                rec = self._recorders.setdefault(
                    pid, Recorder(self.directory, capacity=self.capacity, slab=True)
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
        # Only the calling thread makes its key's tracker (a task's, its loop's thread): the
        # lock guards the tables, not the files a new worker is declared with, so that a
        # thousand threads starting at once do not queue for each other's file work.
        with self.lock:
            vacant = self._vacant.get((key[0], stage)) if worker is None else None
            taken = vacant.pop()[0] if vacant else None
        if taken is None:
            taken = self._declare_worker(stage, resource, worker is None)
        with self.lock:
            tracker = self._trackers.setdefault(key, taken)
            if worker is None and tracker is taken:
                self._threads.setdefault(key[:2], []).append(key)
        if worker is None and tracker is taken:
            self.sample(tracker)
        return tracker

    def sample(self, tracker: native.StateTracker | None, coro: object = None) -> None:
        """Sample the stack of ``tracker``'s worker: the calling thread (or, ``coro`` given,
        the asyncio task whose coroutine it is, on the calling thread's loop), while stacks
        are sampled."""
        tap = self._tracker_taps.get(id(tracker)) if tracker is not None else None
        if tap is None or not self.stacks_ns or self.directory is None:
            return
        pid = os.getpid()
        with self.lock:
            stacks = self._stacks.get(pid)
            if stacks is None:
                rec = self.recorder()
                if rec is None:
                    return
                stacks = self._stacks[pid] = ProcessStacks(rec, self.directory, self.stacks_ns)
        assert tracker is not None
        stacks.add(tracker, tap.probe, coro)

    def _declare_worker(
        self, stage: str, resource: ResourceInfo | None, thread: bool = True
    ) -> native.StateTracker | None:
        """A new worker of ``stage`` declared to the monitor, with its state probe if a query
        watches the stage: its tracker (None: unwatched, or no session). ``thread``: the worker
        is a thread (its CPU time is its own; an asyncio task's is its loop's)."""
        rec = self.recorder()
        if rec is None or self.directory is None:
            return None
        res = resource or self.resource()
        probes: tuple[ProbeInfo, ...] = ()
        if "state" in taps_for(self.watches, stage=stage):
            probes = (ProbeInfo(next_probe_ids(self.directory, 1), "state", stage),)
        found = Topology(
            "", resources=(res,),
            stages=(StageInfo(stage, res.name, self._role(stage), self.named_by.get(stage, "")),),
            probes=probes,
        )  # fmt: skip
        declare(self.directory, found)
        if not probes:
            return None
        tap = rec.tap(probes[0].id, Kind.STATE, cost=COST_CALL)
        tracker = make_tracker(stage, tap, cpu=thread)
        self._tracker_taps[id(tracker)] = tap
        return tracker

    def thread_done(self) -> None:
        """The calling thread's work is over in every stage it worked in (the program's main
        thread once its code has run: the stream nodes it ran included): their workers here
        are in no state from now on (``NO_STATE``)."""
        with self.lock:
            keys = list(self._threads.get((os.getpid(), threading.get_ident()), ()))
            trackers = [self._trackers.get(key) for key in keys]
        for tracker in trackers:
            if tracker is not None:
                tracker.set(NO_STATE)

    def retire_thread(self) -> None:
        """The calling thread ended: its trackers wait for the next thread of their stages
        (``tracker``); those that waited ``VACANT_FOR_S`` record nothing more (their rings
        closed: the monitor takes their workers as gone once it has drained them)."""
        me = (os.getpid(), threading.get_ident())
        now = time.monotonic()
        gone = []
        with self.lock:
            for key in self._threads.pop(me, ()):
                tracker = self._trackers.pop(key, None)
                stacks = self._stacks.get(key[0])
                if tracker is not None and stacks is not None:
                    stacks.remove(tracker)  # its thread is gone: its next one is added anew
                if tracker is not None:
                    post = (key[0], key[2])
                    self._vacant.setdefault(post, []).append((tracker, now))
                    self._vacated.append((now, post, tracker))
            while self._vacated and self._vacated[0][0] + VACANT_FOR_S <= now:
                since, post, tracker = self._vacated.popleft()
                held = self._vacant.get(post)
                # each stage's list is oldest first and taken up from its end: the tracker is
                # at its front if no thread took it up meanwhile (nor left it again since)
                if held and held[0][0] is tracker and held[0][1] == since:
                    del held[0]
                    gone.append(tracker)
                    if not held:
                        del self._vacant[post]
        rec = self.recorder()
        for tracker in gone:
            tap = self._tracker_taps.pop(id(tracker), None)
            if tap is not None and rec is not None:
                rec.retire(tap)

    def _declare_queue(self, q: DeclaredQueue) -> None:
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
        stacks_ns: int = 0,
    ) -> None:
        """Turn on the probes a session needs, recording into ``directory``; stages and queues
        that appear later get probes numbered after these. ``stacks_ns``: each worker's stack
        is sampled this often (0: not at all)."""
        with self.lock:
            self.stacks_ns = stacks_ns
            self.probes = probes
            self.directory = directory
            self.capacity = capacity
            self.watches = watches
            self.owner = os.getpid()
            set_next_probe_id(directory, max((p.id for p in probes), default=0) + 1)
            os.environ[SESSION_ENV] = self._session_env()
            for p in probes:
                if p.kind in ("tail", "head"):
                    self.queues[p.target].attach(p.kind, p.id)

    def deactivate(self) -> None:
        with self.lock:
            for stacks in self._stacks.values():
                stacks.stop()
            self._stacks.clear()
            self.stacks_ns = 0
            os.environ.pop(SESSION_ENV, None)
            for q in self.queues.values():
                q.detach()
            self._trackers.clear()
            self._threads.clear()
            self._tracker_taps.clear()
            self._vacant.clear()
            self._vacated.clear()
            self._recorders.clear()
            self.named_by.clear()
            self.probes = ()
            self.directory = None
            self.watches = []
            self._env_checked = os.getpid()
        close_journal()


#: The drop-in register of this process: process-wide because a program's queues and stages
#: declare themselves wherever they are made, with no handle to pass them.
REGISTRY = Registry()


def gathered(directory: str | Path) -> dict[str, int]:
    """What watching the threads and queues of every process of the program cost, as each told
    it (``SETUP_PREFIX``), added: ``setup_ns``, ``threads``, ``queues``."""
    out = {"setup_ns": 0, "threads": 0, "queues": 0}
    with contextlib.suppress(OSError):
        for path in Path(directory).glob(f"{SETUP_PREFIX}*"):
            with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
                doc = json.loads(path.read_text())
                for key in out:
                    out[key] += int(doc.get(key, 0))
    return out


__all__ = [
    "RAISED", "REGISTRY", "SESSION_ENV", "SETUP_PREFIX", "USED", "DeclaredQueue", "Registry",
    "gathered", "taps_for",
]  # fmt: skip
