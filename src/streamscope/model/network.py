"""A whole pipeline as a queueing network, simulated event by event: what the what-if
predictions run (``analysis.whatif``).

In: a ``Network`` — stages (each a thread drawing its service times from measured samples, the
part of them that holds its interpreter's lock, its per-item overhead, its outputs per input,
its fan-out and fan-in rules), bounded FIFO channels between them (blocking after service: a
stage whose output is full holds its item until there is room), the interpreters whose lock
each stage's CPU time needs, and the machine's cores. Out: ``simulate(...)``, a ``SimResult``:
each channel's insertion and removal times and its time-weighted occupancy levels, each
stage's time in each state, each lock's and the cores' busy time.

The rules are the runner's (``pipeline.run.worker``): a stage with several outputs deals them
round-robin (or broadcasts each), with several inputs takes them round-robin, waiting on the
input whose turn it is (or, ``zip``, one from each); a source makes its items one at a time.
A stage's item is served in parts: first its CPU part (its own code's CPU time and the
runner's per-item overhead), of which the ``locked`` share holds the stage's interpreter lock
(taken in FIFO order, kept from one item to the next until the thread waits, dropped for a
thread that has waited the switch interval: CPython's rule) and the rest (compiled code that
releases the lock) does not; then the rest of its service time (sleeping, waiting for I/O),
which holds nothing. A thread woken from a wait takes the lock back before it goes on. CPU
time runs on the cores, shared equally among the jobs that want one (as the OS shares them).
A channel with a ``delay_ns`` (a
device's link) hands an item out no earlier than that long after it went in. Background CPU
load (``background_cores``, what else the machine ran) is a thread that never stops for each
whole core of it (as a CPU hog is) and jobs of ``background_job_ns`` arriving at random for the
rest; the monitor process takes
``monitor_ns_per_item`` of a core for each item the sources make, in jobs of up to
``monitor_job_ns`` (it reduces what the probes recorded of each item, so its load follows the
rate).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamscope.model._inputs import ModelInputError

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


@dataclass(frozen=True, slots=True)
class StageModel:
    """One stage thread. ``service``: samples of the wall time its own code takes on one item
    (ns; a source: one step of its generator), drawn with replacement; ``cpu_share``: the
    fraction of it that is CPU time (holds the lock and a core); ``overhead_ns``: CPU time per
    item outside its own code (the runner, the channels, the probes); ``ratio``: items it puts
    per item it takes (a source: 1); ``interpreter``: whose lock its CPU time needs;
    ``items``: a source's items (0: as many as the horizon allows); ``speed``: its own code's
    speed-up (2: twice as fast)."""

    name: str
    service: F64
    cpu_share: float = 0.0
    overhead_ns: float = 0.0
    ratio: float = 1.0
    interpreter: str = "main"
    fanout: str = "roundrobin"
    fanin: str = "roundrobin"
    items: int = 0
    speed: float = 1.0
    #: The share of its CPU time that holds the interpreter lock (the rest, compiled code that
    #: releases it, needs a core only).
    locked: float = 1.0
    #: Take the service times in their order (over again once used up) rather than drawing
    #: them at random: a trace replayed, as the model tests and the speed benchmark do.
    in_order: bool = False


@dataclass(frozen=True, slots=True)
class ChannelModel:
    """A bounded FIFO from ``src`` to ``dst`` holding at most ``capacity`` items; an item can be
    taken ``delay_ns`` after it was put at the earliest."""

    name: str
    src: str
    dst: str
    capacity: int
    delay_ns: float = 0.0


@dataclass(frozen=True, slots=True)
class Network:
    """Stages and channels (in the order each stage deals its outputs and takes its inputs),
    the cores the interpreters share, and the background load on them (cores busy on average)."""

    stages: tuple[StageModel, ...]
    channels: tuple[ChannelModel, ...]
    cores: int = 1
    background_cores: float = 0.0
    background_job_ns: float = 1e6
    monitor_ns_per_item: float = 0.0
    monitor_job_ns: float = 1e6
    #: Each interpreter's switch interval (ns; ``sys.getswitchinterval``), 5 ms where not given.
    switch_ns: dict[str, float] = field(default_factory=dict)

    def stage(self, name: str) -> StageModel:
        for s in self.stages:
            if s.name == name:
                return s
        raise KeyError(name)

    def check(self) -> None:
        """A ``ModelInputError`` for a network that cannot be simulated."""
        names = {s.name for s in self.stages}
        if len(names) != len(self.stages):
            raise ModelInputError("a network's stage names must be unique")
        for c in self.channels:
            if c.src not in names or c.dst not in names:
                raise ModelInputError(f"channel {c.name!r} joins a stage the network lacks")
            if c.capacity < 1:
                raise ModelInputError(f"channel {c.name!r}: capacity must be at least 1")
        for s in self.stages:
            if len(s.service) == 0 or not np.all(np.isfinite(s.service)) or s.service.min() < 0:
                raise ModelInputError(f"stage {s.name!r}: needs service-time samples >= 0 (ns)")
            if not s.speed > 0:
                raise ModelInputError(f"stage {s.name!r}: speed must be > 0, not {s.speed}")
        if self.cores < 1:
            raise ModelInputError(f"a network needs at least 1 core, not {self.cores}")


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated run. ``end_ns``: when the last stage ended (or the horizon);
    ``put_times`` / ``take_times``: per channel, when each item went in and came out;
    ``levels``: per channel, ns spent at each level 0..capacity; ``states``: per stage, ns in
    each of ``STATES`` from 0 to its end; ``lock_busy``: per interpreter, ns its lock was held;
    ``cores_busy``: core-ns the stages' CPU parts used; ``cpu``: per stage, the CPU time its
    CPU parts took, and ``runq`` the ns they were slowed by sharing the cores (their wall time
    less their work: the run queue's wait)."""

    end_ns: float
    put_times: dict[str, F64]
    take_times: dict[str, F64]
    levels: dict[str, F64]
    states: dict[str, F64]
    lock_busy: dict[str, float]
    cores_busy: float
    cpu: dict[str, float] = field(default_factory=dict)
    runq: dict[str, float] = field(default_factory=dict)
    #: Every stage ended (or the horizon came); False: the network stalled, every stage
    #: waiting on another (a cycle of full channels), and the figures stop there.
    complete: bool = True

    def mean_occupancy(self, channel: str) -> float:
        lv = self.levels[channel]
        total = lv.sum()
        return float((lv * np.arange(len(lv))).sum() / total) if total > 0 else math.nan

    def shares(self, stage: str) -> F64:
        """The stage's share of its working time (busy + blocked) in each of ``STATES``."""
        st = self.states[stage]
        work = st[BUSY] + st[BLOCKED_IN] + st[BLOCKED_OUT]
        return st / work if work > 0 else np.zeros(len(STATES))


# Event kinds.
_CPU_TICK, _WAKE, _START, _BACKGROUND, _SWITCH = range(5)
#: The monitor's CPU job (``_Simulation.jobs``); background jobs count down from ``_BG``.
_MONITOR, _BG = -2, -10
#: What a thread does once it holds its lock again (``_Worker.resume``): run its CPU part, take
#: an input, put an output (into ``put_ci``: there was room), go on putting its outputs (after
#: its sleep), or go on after compiled code.
_R_CPU, _R_GET, _R_PUT, _R_EMIT, _R_AFTER = range(5)
#: CPython's default switch interval: a thread waiting this long for the lock makes its holder
#: drop it.
DEFAULT_SWITCH_NS = 5e6


@dataclass(slots=True)
class _Chan:
    cap: int
    delay: float
    items: deque[float] = field(default_factory=deque)  # ready times
    getter: int = -1  # the worker waiting to take, -1: none
    putters: deque[int] = field(default_factory=deque)  # workers waiting for room
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
    idx: int
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


def simulate(
    net: Network,
    *,
    horizon_ns: float = math.inf,
    seed: int = 0,
    resample: bool = False,
    compiled: bool | None = None,
) -> SimResult:
    """Simulate ``net`` until every source has made its items and the pipeline drained (or
    ``horizon_ns``). ``resample``: draw each stage's service pool afresh from its samples (a
    bootstrap replication: the spread of the results then includes the samples' own).
    ``compiled``: the compiled event loop (None: where it was built), else the Python loop;
    both give the same result, bit for bit."""
    net.check()
    if math.isinf(horizon_ns) and any(s.items <= 0 for s in net.stages if _is_source(net, s)):
        raise ModelInputError("a source with no item count needs a finite horizon")
    if compiled and not COMPILED:
        raise ModelInputError("the compiled event loop was not built here")
    sim = _Simulation(net, horizon_ns, np.random.default_rng(seed), resample)
    return sim.run_compiled() if (COMPILED if compiled is None else compiled) else sim.run()


def _is_source(net: Network, s: StageModel) -> bool:
    return not any(c.dst == s.name for c in net.channels)


class _Simulation:
    """One run of a network. A stage thread holds its interpreter's lock from its CPU part on
    until it waits (for an input, for room, for its sleep, or in compiled code that releases
    the lock) — running item after item in pure Python keeps it — and drops it for another
    thread that has waited the switch interval (CPython's rule), mid-item if need be."""

    def __init__(
        self, net: Network, horizon: float, rng: np.random.Generator, resample: bool
    ) -> None:
        self.net, self.horizon, self.rng = net, horizon, rng
        cidx = {c.name: i for i, c in enumerate(net.channels)}
        sidx = {s.name: i for i, s in enumerate(net.stages)}
        self.chans = [_Chan(c.capacity, float(c.delay_ns)) for c in net.channels]
        names = sorted({s.interpreter for s in net.stages})
        lidx = {name: i for i, name in enumerate(names)}
        self.lock_names = names
        self.locks = [_Lock(float(net.switch_ns.get(n, DEFAULT_SWITCH_NS))) for n in names]
        #: CPU jobs on the cores, shared equally (as the OS shares them): id (a worker's index,
        #: ``_MONITOR``, a background job's) -> its work left (ns).
        self.jobs: dict[int, float] = {}
        self.cpu_t = 0.0  # the jobs' work left is as of this time
        self.cpu_token = 0  # the one CPU tick due
        self.stage_jobs = 0  # jobs of stages among them
        self.bg_id = _BG
        self.cores_busy = 0.0
        self.workers: list[_Worker] = []
        for s in net.stages:
            pool = np.asarray(s.service, dtype=np.float64)
            if resample and not s.in_order:
                pool = rng.choice(pool, size=len(pool), replace=True)
            w = _Worker(
                idx=sidx[s.name],
                service=pool / s.speed if s.speed != 1.0 else pool,
                cpu_share=min(max(s.cpu_share, 0.0), 1.0),
                overhead=max(s.overhead_ns, 0.0),
                locked=min(max(s.locked, 0.0), 1.0),
                ratio=max(s.ratio, 0.0),
                lock=lidx[s.interpreter],
                ins=[cidx[c.name] for c in net.channels if c.dst == s.name],
                outs=[cidx[c.name] for c in net.channels if c.src == s.name],
                broadcast=s.fanout == "broadcast",
                zip_in=s.fanin == "zip",
                left=-1,
                in_order=s.in_order,
            )
            if not w.ins:
                w.left = s.items if s.items > 0 else -1
            self.workers.append(w)
        self.draws = [self._pool(w) for w in self.workers]
        self.heap: list[tuple[float, int, int, int, int]] = []
        self.seq = 0
        self.now = 0.0
        self.backlog = 0.0  # the monitor's CPU ns owed for the items made so far
        self.monitor_on = False  # a monitor job runs or waits for a core
        self.live = 0  # events of the stages in the heap (the background's go on for ever)
        self.finished = 0  # stages done

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

    def run(self) -> SimResult:
        for ch in self.chans:
            ch.levels = [0.0] * (ch.cap + 1)
        for w in self.workers:
            self._at(0.0, _START, w.idx)
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
                        else:
                            self._serve(w)
            if self.finished == n or (not self.live and not self.stage_jobs):
                break  # all done, or stuck (every stage waiting on another)
        return self._result()

    def run_compiled(self) -> SimResult:
        """``run`` by the compiled loop (``_netsim``), which calls back for the random numbers
        (``_pool``, ``_bg_gap``) in the order ``run`` draws them."""
        assert _netsim is not None
        net = self.net
        self.bg_part = float(net.background_cores) - int(net.background_cores)
        workers = [
            (self.draws[i], w.cpu_share, w.overhead, w.locked, w.ratio, w.lock, w.ins, w.outs,
             w.broadcast, w.zip_in, w.left, w.in_order)
            for i, w in enumerate(self.workers)
        ]  # fmt: skip
        end, finished, chans, workers_out, lock_busy, cores_busy = _netsim.run(
            workers, [(c.cap, c.delay) for c in self.chans], [lk.switch for lk in self.locks],
            int(net.cores), float(net.background_cores), float(net.background_job_ns),
            float(net.monitor_ns_per_item), float(net.monitor_job_ns), float(self.horizon),
            lambda i: self._pool(self.workers[i]), self._bg_gap,
        )  # fmt: skip
        names = [c.name for c in net.channels]
        stages = [s.name for s in net.stages]

        def arr(b: object) -> F64:  # the loop's own memory, viewed (writable), not copied
            return np.frombuffer(b, dtype=np.float64)  # type: ignore[call-overload,no-any-return]

        return SimResult(
            end_ns=end,
            put_times={n: arr(c[0]) for n, c in zip(names, chans, strict=True)},
            take_times={n: arr(c[1]) for n, c in zip(names, chans, strict=True)},
            levels={n: arr(c[2]) for n, c in zip(names, chans, strict=True)},
            states={n: arr(w[0]) for n, w in zip(stages, workers_out, strict=True)},
            lock_busy=dict(zip(self.lock_names, lock_busy, strict=True)),
            cores_busy=cores_busy,
            cpu={n: w[2] for n, w in zip(stages, workers_out, strict=True)},
            runq={n: w[1] for n, w in zip(stages, workers_out, strict=True)},
            complete=finished == len(self.workers) or end >= self.horizon,
        )

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
            else:
                ch.getter = w.idx
            self._drop(w)
            return

    def _drained(self, ci: int) -> bool:
        ch = self.chans[ci]
        return ch.ended and not ch.items

    def _room(self, ci: int) -> None:
        """An item left channel ``ci``: the first stage waiting to put into it wakes (and puts
        once it holds its lock: it is the channel's only producer, the room stays its)."""
        p = self.workers[self.chans[ci].putters.popleft()]
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
            if len(ch.items) >= ch.cap:
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
        if ch.getter >= 0:
            g = ch.getter
            ch.getter = -1
            self._at(max(self.now, ch.items[-1]), _WAKE, g)

    def _finish(self, w: _Worker) -> None:
        if w.done:
            return
        self._drop(w)
        self._set(w, IDLE)
        w.done = True
        self.finished += 1
        for ci in w.outs:
            ch = self.chans[ci]
            ch.ended = True
            if ch.getter >= 0:
                g = ch.getter
                ch.getter = -1
                self._at(self.now, _WAKE, g)

    def _result(self) -> SimResult:
        end = self.now
        self._cpu_advance()
        for w in self.workers:
            self._set(w, w.state)
        for ch in self.chans:
            self._level(ch)
        for lk in self.locks:
            if lk.holder >= 0:
                lk.busy += end - lk.since
        names = [c.name for c in self.net.channels]
        return SimResult(
            end_ns=end,
            put_times={n: np.asarray(c.puts) for n, c in zip(names, self.chans, strict=True)},
            take_times={n: np.asarray(c.takes) for n, c in zip(names, self.chans, strict=True)},
            levels={n: np.asarray(c.levels) for n, c in zip(names, self.chans, strict=True)},
            states={
                s.name: np.asarray(w.spent)
                for s, w in zip(self.net.stages, self.workers, strict=True)
            },
            lock_busy={n: lk.busy for n, lk in zip(self.lock_names, self.locks, strict=True)},
            cores_busy=self.cores_busy,
            cpu={s.name: w.worked for s, w in zip(self.net.stages, self.workers, strict=True)},
            runq={s.name: w.runq for s, w in zip(self.net.stages, self.workers, strict=True)},
            complete=self.finished == len(self.workers) or end >= self.horizon,
        )
