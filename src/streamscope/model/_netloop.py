"""The pipeline simulator's event loop (``model.network.simulate``), in Python: the twin of the
compiled loop (``_network.c``, built as ``_netsim``), which follows it step for step and gives
the same figures bit for bit.

In: a ``Network`` (its stages, each run as ``workers`` worker threads, its channels, its
interpreters' locks, its cores) and the generator its random numbers come from. Out: a ``Raw``
result, per channel and per worker, that ``model.network`` sums up per stage. What is here: the
state of the channels (their items, the workers waiting to take from them and to put into them),
of the interpreters' locks, of the workers and of the cores; the steps of a worker (taking an
input, serving it in parts, putting its outputs); the loop of events; and ``run_compiled``,
which hands the same state to the compiled loop.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from streamscope.model.network import Network, StageModel

try:  # the event loop compiled (setup.py); the Python loop below where it was not built
    from streamscope.model import _netsim  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - an install without a compiler
    _netsim = None
#: Whether the compiled event loop is here (``simulate`` uses it unless told not to).
COMPILED = _netsim is not None

F64 = NDArray[np.float64]

#: A stage's states in a simulation, as the runner's tracker names them.
IDLE, BUSY, BLOCKED_IN, BLOCKED_OUT = 0, 1, 2, 3
STATES = ("idle", "busy", "blocked_in", "blocked_out")

# Event kinds.
_CPU_TICK, _WAKE, _START, _BACKGROUND, _SWITCH = range(5)
#: The monitor's CPU job (``Simulation.jobs``); background jobs count down from ``_BG``.
_MONITOR, _BG = -2, -10
#: What a thread does once it holds its lock again (``_Worker.resume``): run its CPU part, take
#: an input, put an output (into ``put_ci``: room was kept for it), go on putting its outputs (after
#: its sleep), or go on after compiled code.
_R_CPU, _R_GET, _R_PUT, _R_EMIT, _R_AFTER = range(5)
#: CPython's default switch interval: a thread waiting this long for the lock makes its holder
#: drop it.
DEFAULT_SWITCH_NS = 5e6


@dataclass(slots=True)
class _Chan:
    """A channel: its items, the workers waiting on it (to take: in the order they asked; for
    room: in the order they came), ``reserved`` places of room already handed to woken putters,
    and ``producers``, the workers of its producer stage still running (it ends at 0)."""

    cap: int
    delay: float
    items: deque[float] = field(default_factory=deque)  # ready times
    getters: deque[int] = field(default_factory=deque)  # workers waiting to take
    putters: deque[int] = field(default_factory=deque)  # workers waiting for room
    reserved: int = 0
    producers: int = 0
    ended: bool = False
    level_t: float = 0.0
    levels: list[float] = field(default_factory=list)
    puts: list[float] = field(default_factory=list)
    takes: list[float] = field(default_factory=list)


@dataclass(slots=True)
class _Lock:
    """An interpreter's lock: its holder (-1: free), the workers waiting for it in order, its
    switch interval, and ``gen``, counting handovers (a forced switch due for an older one is
    void)."""

    switch: float
    holder: int = -1
    wait: deque[int] = field(default_factory=deque)
    since: float = 0.0
    busy: float = 0.0
    gen: int = 0
    switch_gen: int = -1  # the handover a forced switch is scheduled for


@dataclass(slots=True)
class _Worker:
    """One worker thread of a stage (``stage``: its index; ``idx``: the worker's own)."""

    idx: int
    stage: int
    service: F64
    cpu_share: float
    overhead: float
    locked: float
    ratio: float
    lock: int
    ins: list[int]
    outs: list[int]
    broadcast: bool
    zip_in: bool
    left: int  # a source's items still to make (-1: unbounded)
    in_order: bool = False
    start: float = 0.0  # when it begins (``StageModel.start_ns``)
    state: int = IDLE
    since: float = 0.0
    spent: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    draw: int = 0
    cpu: float = 0.0  # the item's CPU time holding the lock (left of it, if preempted)
    unlocked: float = 0.0  # ... and not holding it (a core only)
    free: float = 0.0
    credit: float = 0.0
    pending: int = 0  # outputs still to put for the item in hand
    rr_out: int = 0
    rr_in: int = 0
    zip_left: int = 0  # zip: inputs still to take for this item
    done: bool = False
    holds: bool = False  # it holds its interpreter's lock
    in_cpu: bool = False  # its CPU job is its locked part (else its unlocked one)
    resume: int = _R_GET
    put_ci: int = -1
    job_t: float = 0.0  # its CPU job: when it started, and its work then
    job_w: float = 0.0
    runq: float = 0.0
    worked: float = 0.0


class Raw(NamedTuple):
    """What a loop (either) leaves: ``end``, the workers ``finished``, per channel (its
    insertion times, removal times, ns at each level), per worker (ns in each state, its CPU
    parts' wait for a core, their CPU time), per lock its busy ns, and the cores' busy ns."""

    end: float
    finished: int
    chans: list[tuple[F64, F64, F64]]
    workers: list[tuple[F64, float, float]]
    lock_busy: list[float]
    cores_busy: float


def lock_name(s: StageModel, k: int) -> str:
    """The lock worker ``k`` of stage ``s`` needs: its stage's interpreter's, or with
    ``own_interpreters`` one of its own (a process of a pool)."""
    return f"{s.interpreter}#{k}" if s.own_interpreters else s.interpreter


def source_items(s: StageModel, k: int) -> int:
    """Worker ``k``'s share of source ``s``'s items (the first ones get the remainder); -1:
    unbounded."""
    if s.items <= 0:
        return -1
    return s.items // s.workers + (1 if k < s.items % s.workers else 0)


class Simulation:
    """One run of a network. A stage thread holds its interpreter's lock from its CPU part on
    until it waits (for an input, for room, for its sleep, or in compiled code that releases
    the lock) — running item after item in pure Python keeps it — and drops it for another
    thread that has waited the switch interval (CPython's rule), mid-item if need be. A stage
    of several ``workers`` is that many such threads (``stage_of``: each one's stage), drawing
    each its own service times from the stage's samples, on the same channels."""

    def __init__(
        self, net: Network, horizon: float, rng: np.random.Generator, resample: bool
    ) -> None:
        self.net, self.horizon, self.rng = net, horizon, rng
        cidx = {c.name: i for i, c in enumerate(net.channels)}
        self.chans = [_Chan(c.capacity, float(c.delay_ns)) for c in net.channels]
        base = {lock_name(s, k): s.interpreter for s in net.stages for k in range(s.workers)}
        names = sorted(base)
        lidx = {name: i for i, name in enumerate(names)}
        self.lock_names = names
        # A process's own lock: its switch interval, else its stage's interpreter's.
        sw = net.switch_ns
        self.locks = [_Lock(float(sw.get(n, sw.get(base[n], DEFAULT_SWITCH_NS)))) for n in names]
        #: CPU jobs on the cores, shared equally (as the OS shares them): id (a worker's index,
        #: ``_MONITOR``, a background job's) -> its work left (ns).
        self.jobs: dict[int, float] = {}
        self.cpu_t = 0.0  # the jobs' work left is as of this time
        self.cpu_token = 0  # the one CPU tick due
        self.stage_jobs = 0  # jobs of stages among them
        self.bg_id = _BG
        self.cores_busy = 0.0
        self.workers: list[_Worker] = []
        for si, s in enumerate(net.stages):
            pool = np.asarray(s.service, dtype=np.float64)
            if resample and not s.in_order:
                pool = rng.choice(pool, size=len(pool), replace=True)
            service = pool / s.speed if s.speed != 1.0 else pool
            ins = [cidx[c.name] for c in net.channels if s.name in (c.dst, *c.more_dst)]
            outs = [cidx[c.name] for c in net.channels if s.name in (c.src, *c.more_src)]
            for k in range(s.workers):
                w = _Worker(
                    idx=len(self.workers),
                    stage=si,
                    service=service,
                    cpu_share=min(max(s.cpu_share, 0.0), 1.0),
                    overhead=max(s.overhead_ns, 0.0),
                    locked=min(max(s.locked, 0.0), 1.0),
                    ratio=max(s.ratio, 0.0),
                    lock=lidx[lock_name(s, k)],
                    ins=ins,
                    outs=outs,
                    broadcast=s.fanout == "broadcast",
                    zip_in=s.fanin == "zip",
                    left=-1 if ins else source_items(s, k),
                    in_order=s.in_order,
                    start=max(float(s.start_ns), 0.0),
                )
                for ci in outs:
                    self.chans[ci].producers += 1
                self.workers.append(w)
        self.stage_of = [w.stage for w in self.workers]
        self.draws = [self._pool(w) for w in self.workers]
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.now = 0.0
        self.backlog = 0.0  # the monitor's CPU ns owed for the items made so far
        self.monitor_on = False  # a monitor job runs or waits for a core
        self.live = 0  # events of the stages in the heap (the background's go on for ever)
        self.finished = 0  # workers done

    def _pool(self, w: _Worker) -> F64:
        """Service times in the order the worker will use them (drawn up front, refilled)."""
        if w.in_order:
            return w.service
        return self.rng.choice(w.service, size=4096, replace=True)

    def _at(self, t: float, kind: int, who: int, token: int = 0) -> None:
        self.seq += 1
        if kind not in (_BACKGROUND, _CPU_TICK):
            self.live += 1
        heapq.heappush(self.heap, (t, self.seq, kind, who, token))

    def _set(self, w: _Worker, state: int) -> None:
        w.spent[w.state] += self.now - w.since
        w.state, w.since = state, self.now

    def _level(self, ch: _Chan) -> None:
        """Account the time at ``ch``'s level up to now (before it changes)."""
        ch.levels[len(ch.items)] += self.now - ch.level_t
        ch.level_t = self.now

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> Raw:
        for ch in self.chans:
            ch.levels = [0.0] * (ch.cap + 1)
        for w in self.workers:
            self._at(w.start, _START, w.idx)
        # Background load: a whole core's worth is a thread that never stops (as a CPU hog
        # is), the rest jobs of ``background_job_ns`` arriving at random.
        whole = int(self.net.background_cores)
        for i in range(whole):
            self._cpu_start(_BG - 1 - i, math.inf)
        self.bg_id = _BG - 1 - whole
        self.bg_part = self.net.background_cores - whole
        if self.bg_part > 1e-9:
            self._at(self._bg_gap(), _BACKGROUND, -1)
        heap = self.heap
        n = len(self.workers)
        while heap:
            t, _, kind, who, token = heapq.heappop(heap)
            if t > self.horizon:
                self.now = self.horizon
                break
            self.now = t
            if kind == _CPU_TICK:
                if token == self.cpu_token:
                    self._cpu_tick()
            elif kind == _BACKGROUND:
                self._at(self.now + self._bg_gap(), _BACKGROUND, -1)
                self.bg_id -= 1
                self._cpu_start(self.bg_id, self.net.background_job_ns)
            else:
                self.live -= 1
                if kind == _SWITCH:
                    self._switch(who, token)
                else:
                    w = self.workers[who]
                    if kind == _WAKE:
                        self._wake(w)
                    else:
                        self._set(w, BUSY)
                        if w.ins:
                            w.resume = _R_GET
                            self._wake(w)
                        elif w.left == 0:  # a source's worker left no item of its own
                            self._finish(w)
                        else:
                            self._serve(w)
            if self.finished == n or (not self.live and not self.stage_jobs):
                break  # all done, or stuck (every worker waiting on another)
        return self._result()

    def run_compiled(self) -> Raw:
        """``run`` by the compiled loop (``_netsim``), which calls back for the random numbers
        (``_pool``, ``_bg_gap``) in the order ``run`` draws them."""
        assert _netsim is not None
        net = self.net
        self.bg_part = float(net.background_cores) - int(net.background_cores)
        workers = [
            (self.draws[i], w.cpu_share, w.overhead, w.locked, w.ratio, w.lock, w.ins, w.outs,
             w.broadcast, w.zip_in, w.left, w.in_order, w.start)
            for i, w in enumerate(self.workers)
        ]  # fmt: skip
        end, finished, chans, workers_out, lock_busy, cores_busy = _netsim.run(
            workers, [(c.cap, c.delay) for c in self.chans], [lk.switch for lk in self.locks],
            int(net.cores), float(net.background_cores), float(net.background_job_ns),
            float(net.monitor_ns_per_item), float(net.monitor_job_ns), float(self.horizon),
            lambda i: self._pool(self.workers[i]), self._bg_gap,
        )  # fmt: skip

        def arr(b: object) -> F64:  # the loop's own memory, viewed (writable), not copied
            return np.frombuffer(b, dtype=np.float64)  # type: ignore[call-overload,no-any-return]

        return Raw(
            end, finished, [(arr(c[0]), arr(c[1]), arr(c[2])) for c in chans],
            [(arr(w[0]), w[1], w[2]) for w in workers_out], list(lock_busy), cores_busy,
        )  # fmt: skip

    def _bg_gap(self) -> float:
        job = self.net.background_job_ns
        return float(self.rng.exponential(job / self.bg_part))

    # -- the cores ---------------------------------------------------------------------------

    def _cpu_rate(self) -> float:
        """The speed of each job: a core each while there are no more jobs than cores."""
        n = len(self.jobs)
        return min(1.0, self.net.cores / n) if n else 1.0

    def _cpu_advance(self) -> None:
        dt = self.now - self.cpu_t
        if dt > 0 and self.jobs:
            done = dt * self._cpu_rate()
            for k in self.jobs:
                self.jobs[k] -= done
            self.cores_busy += dt * min(len(self.jobs), self.net.cores)
        self.cpu_t = self.now

    def _cpu_start(self, job: int, work: float) -> None:
        self._cpu_advance()
        self.jobs[job] = work
        if job >= 0:
            self.stage_jobs += 1
            w = self.workers[job]
            w.job_t, w.job_w = self.now, work
        self._cpu_schedule()

    def _cpu_stop(self, job: int) -> float:
        """Take a job off the cores (preempted); its work left."""
        self._cpu_advance()
        left = self.jobs.pop(job)
        if job >= 0:
            self.stage_jobs -= 1
            w = self.workers[job]
            done = w.job_w - max(left, 0.0)
            w.runq += (self.now - w.job_t) - done
            w.worked += done
        self._cpu_schedule()
        return max(left, 0.0)

    def _cpu_schedule(self) -> None:
        """The next job to finish, at the rate the cores now go: one tick due, earlier void."""
        self.cpu_token += 1
        if self.jobs:
            left = max(min(self.jobs.values()), 0.0)
            if math.isfinite(left):  # (threads of background load never end)
                self._at(self.now + left / self._cpu_rate(), _CPU_TICK, -1, self.cpu_token)

    def _cpu_tick(self) -> None:
        self._cpu_advance()
        done = [k for k, v in self.jobs.items() if v <= 1e-3]
        for k in done:
            del self.jobs[k]
            if k >= 0:
                self.stage_jobs -= 1
        self._cpu_schedule()
        for k in done:
            if k >= 0:
                w = self.workers[k]
                w.runq += (self.now - w.job_t) - w.job_w
                w.worked += w.job_w
                if w.in_cpu:
                    self._cpu_done(w)
                else:  # its compiled code is done: it wants its lock back
                    w.resume = _R_AFTER
                    self._wake(w)
            elif k == _MONITOR:
                self.monitor_on = False
                self._monitor()

    def _monitor(self) -> None:
        """The monitor owes ``backlog``: a job of it runs (if none does)."""
        if self.monitor_on or self.backlog < 1.0 or self.finished == len(self.workers):
            return
        self.monitor_on = True
        job = min(self.backlog, self.net.monitor_job_ns)
        self.backlog -= job
        self._cpu_start(_MONITOR, job)

    # -- taking an input ---------------------------------------------------------------------

    def _get(self, w: _Worker) -> None:
        """Take the next input by the fan-in rule; start serving once the item is in hand."""
        while True:
            active = [i for i in w.ins if not self._drained(i)]
            if not active:
                if w.zip_left and w.zip_left < len(w.ins):
                    w.zip_left = 0
                    self._serve(w)  # what a zip took before its inputs ended
                    return
                self._finish(w)
                return
            ci = active[w.rr_in % len(active)]
            ch = self.chans[ci]
            if ch.items and ch.items[0] <= self.now:
                self._level(ch)
                ch.items.popleft()
                ch.takes.append(self.now)
                if ch.putters:
                    self._room(ci)
                if w.zip_in and len(w.ins) > 1:
                    w.zip_left = (w.zip_left or len(active)) - 1
                    w.rr_in += 1
                    if w.zip_left > 0:
                        continue
                else:
                    w.rr_in += 1
                self._serve(w)
                return
            self._set(w, BLOCKED_IN)
            w.resume = _R_GET
            if ch.items:  # in flight on a link: ready later
                self._at(ch.items[0], _WAKE, w.idx)
            else:  # behind the workers that asked before it
                ch.getters.append(w.idx)
            self._drop(w)
            return

    def _drained(self, ci: int) -> bool:
        ch = self.chans[ci]
        return ch.ended and not ch.items

    def _room(self, ci: int) -> None:
        """An item left channel ``ci``: the first worker waiting to put into it wakes (and puts
        once it holds its lock). The room is kept for it (``reserved``): another worker of its
        stage that comes to put meanwhile waits behind it."""
        ch = self.chans[ci]
        ch.reserved += 1
        p = self.workers[ch.putters.popleft()]
        p.resume, p.put_ci = _R_PUT, ci
        self._at(self.now, _WAKE, p.idx)

    def _wake(self, w: _Worker) -> None:
        """``w`` goes on (``w.resume``) once it holds its lock: at once if it does or the lock
        is free, else after the threads waiting before it."""
        if w.holds:
            self._resume(w)
            return
        lk = self.locks[w.lock]
        if lk.holder < 0:
            self._take(w.lock, w)
            self._resume(w)
        else:
            lk.wait.append(w.idx)
            self._schedule_switch(w.lock)

    def _resume(self, w: _Worker) -> None:
        r = w.resume
        if r == _R_CPU:
            self._want_core(w)
        elif r == _R_GET:
            self._get(w)
        elif r == _R_PUT:
            self.chans[w.put_ci].reserved -= 1
            self._put_one(w, w.put_ci)
            self._emit(w)
        elif r == _R_EMIT:
            self._emit(w)
        else:
            self._after_cpu(w)

    # -- serving -----------------------------------------------------------------------------

    def _serve(self, w: _Worker) -> None:
        self._set(w, BUSY)
        if w.draw >= len(self.draws[w.idx]):
            self.draws[w.idx] = self._pool(w)
            w.draw = 0
        s = float(self.draws[w.idx][w.draw])
        w.draw += 1
        cpu = w.overhead + w.cpu_share * s
        w.cpu = cpu * w.locked
        w.unlocked = cpu - w.cpu
        w.free = s - w.cpu_share * s
        w.credit += w.ratio if w.ins else 1.0
        w.pending = int(w.credit + 1e-9)
        w.credit -= w.pending
        if w.cpu > 0:
            w.resume = _R_CPU
            self._wake(w)  # holding the lock, it goes on; else it waits for it
        else:
            self._drop(w)
            if w.unlocked > 0:
                self._want_core(w)
            else:
                self._after_cpu(w)

    def _hand(self, li: int, w: _Worker) -> None:
        """The lock goes to ``w``, which goes on with what it waited for it to do: as an event
        of its own at this time, never inside the step of the thread that let the lock go
        (which may not have said yet what it waits for)."""
        self._take(li, w)
        self._at(self.now, _WAKE, w.idx)

    def _take(self, li: int, w: _Worker) -> None:
        lk = self.locks[li]
        lk.holder, lk.since = w.idx, self.now
        lk.gen += 1
        w.holds = True
        if lk.wait:
            self._schedule_switch(li)

    def _schedule_switch(self, li: int) -> None:
        lk = self.locks[li]
        if lk.switch_gen != lk.gen:
            lk.switch_gen = lk.gen
            self._at(self.now + lk.switch, _SWITCH, li, lk.gen)

    def _drop(self, w: _Worker) -> None:
        """``w`` lets its lock go (it waits, or is done): the first waiting thread takes it."""
        if not w.holds:
            return
        w.holds = False
        li = w.lock
        lk = self.locks[li]
        lk.busy += self.now - lk.since
        lk.holder = -1
        if lk.wait:
            self._hand(li, self.workers[lk.wait.popleft()])

    def _switch(self, li: int, gen: int) -> None:
        """A thread has waited the switch interval for lock ``li``: its holder drops it (in the
        middle of its CPU part, whose rest it waits to finish) unless it changed hands."""
        lk = self.locks[li]
        if gen != lk.gen or not lk.wait or lk.holder < 0:
            return
        h = self.workers[lk.holder]
        if not h.in_cpu:  # not running its Python code now: try again later
            lk.switch_gen = -1
            self._schedule_switch(li)
            return
        h.cpu = self._cpu_stop(h.idx)
        h.in_cpu = False
        h.resume = _R_CPU
        lk.wait.append(h.idx)  # behind those waiting (before the lock goes: it may come back)
        self._drop(h)
        self._schedule_switch(li)

    def _want_core(self, w: _Worker) -> None:
        """``w``'s CPU part runs on the cores: its locked part (it holds the lock), else its
        unlocked one."""
        if w.cpu > 0:
            w.in_cpu = True
            self._cpu_start(w.idx, w.cpu)
        else:
            self._cpu_start(w.idx, w.unlocked)

    def _cpu_done(self, w: _Worker) -> None:
        w.in_cpu = False
        w.cpu = 0.0
        if w.unlocked > 0:  # compiled code: the lock goes, the cores go on
            self._drop(w)
            self._cpu_start(w.idx, w.unlocked)
            return
        self._after_cpu(w)

    def _after_cpu(self, w: _Worker) -> None:
        w.unlocked = 0.0
        if w.free > 0:
            self._drop(w)  # sleeping, waiting for I/O: the lock is free meanwhile
            w.resume = _R_EMIT
            self._at(self.now + w.free, _WAKE, w.idx)
        else:
            self._emit(w)

    # -- putting the outputs -----------------------------------------------------------------

    def _emit(self, w: _Worker) -> None:
        """Put the item's outputs (blocking on a full channel), then take the next input."""
        while w.pending > 0 and w.outs:
            # Round-robin: each output to the next channel; a broadcast: each output to every
            # channel in turn. ``rr_out`` counts the puts done either way.
            ci = w.outs[w.rr_out % len(w.outs)]
            ch = self.chans[ci]
            if len(ch.items) + ch.reserved >= ch.cap:
                self._set(w, BLOCKED_OUT)
                ch.putters.append(w.idx)
                self._drop(w)
                return
            self._put_one(w, ci)
        w.pending = 0
        if w.ins:
            self._set(w, BUSY)
            self._get(w)
        elif w.left != 0 and self.now < self.horizon:
            if w.left > 0:
                w.left -= 1
            if w.left == 0:
                self._finish(w)
            else:
                self._serve(w)
        else:
            self._finish(w)

    def _put_one(self, w: _Worker, ci: int) -> None:
        ch = self.chans[ci]
        self._level(ch)
        ch.items.append(self.now + ch.delay)
        ch.puts.append(self.now)
        if not w.ins and self.net.monitor_ns_per_item > 0:
            self.backlog += self.net.monitor_ns_per_item
            self._monitor()
        w.rr_out += 1
        if w.broadcast:
            if w.rr_out % len(w.outs) == 0:
                w.pending -= 1
        else:
            w.pending -= 1
        if ch.getters:  # the worker that asked first
            self._at(max(self.now, ch.items[-1]), _WAKE, ch.getters.popleft())

    def _finish(self, w: _Worker) -> None:
        if w.done:
            return
        self._drop(w)
        self._set(w, IDLE)
        w.done = True
        self.finished += 1
        for ci in w.outs:  # a channel ends with the last worker of its producer stage
            ch = self.chans[ci]
            ch.producers -= 1
            if ch.producers == 0:
                ch.ended = True
                while ch.getters:
                    self._at(self.now, _WAKE, ch.getters.popleft())

    def _result(self) -> Raw:
        end = self.now
        self._cpu_advance()
        for w in self.workers:
            self._set(w, w.state)
        for ch in self.chans:
            self._level(ch)
        for lk in self.locks:
            if lk.holder >= 0:
                lk.busy += end - lk.since
        return Raw(
            end, self.finished,
            [(np.asarray(c.puts), np.asarray(c.takes), np.asarray(c.levels)) for c in self.chans],
            [(np.asarray(w.spent), w.runq, w.worked) for w in self.workers],
            [lk.busy for lk in self.locks], self.cores_busy,
        )  # fmt: skip
