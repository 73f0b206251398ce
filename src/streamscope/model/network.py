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
A stage's item is served in two parts: first its CPU part (its own code's CPU time and the
runner's per-item overhead), which holds the stage's interpreter lock and a core, waiting in
FIFO order for each; then the rest of its service time (sleeping, waiting for I/O), which holds
neither. Time that releases the lock while it computes (numpy, compiled code) is counted as
CPU time that holds it: the model is pessimistic there. A channel with a ``delay_ns`` (a
device's link) hands an item out no earlier than that long after it went in. Background CPU
load (the monitor process) takes cores in jobs of ``background_job_ns`` at the measured rate.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamscope.model._inputs import ModelInputError

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
    ``cores_busy``: core-ns the stages' CPU parts used."""

    end_ns: float
    put_times: dict[str, F64]
    take_times: dict[str, F64]
    levels: dict[str, F64]
    states: dict[str, F64]
    lock_busy: dict[str, float]
    cores_busy: float

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
_CPU_DONE, _FREE_DONE, _RETRY_GET, _START, _BACKGROUND, _CORE_DONE = range(6)


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
    state: int = IDLE
    since: float = 0.0
    spent: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0, 0.0])
    draw: int = 0
    cpu: float = 0.0  # the item's CPU time holding the lock
    unlocked: float = 0.0  # ... and not holding it (a core only)
    free: float = 0.0
    credit: float = 0.0
    pending: int = 0  # outputs still to put for the item in hand
    rr_out: int = 0
    rr_in: int = 0
    zip_left: int = 0  # zip: inputs still to take for this item
    done: bool = False


def simulate(
    net: Network,
    *,
    horizon_ns: float = math.inf,
    seed: int = 0,
    resample: bool = False,
) -> SimResult:
    """Simulate ``net`` until every source has made its items and the pipeline drained (or
    ``horizon_ns``). ``resample``: draw each stage's service pool afresh from its samples (a
    bootstrap replication: the spread of the results then includes the samples' own)."""
    net.check()
    if math.isinf(horizon_ns) and any(s.items <= 0 for s in net.stages if _is_source(net, s)):
        raise ModelInputError("a source with no item count needs a finite horizon")
    return _Simulation(net, horizon_ns, np.random.default_rng(seed), resample).run()


def _is_source(net: Network, s: StageModel) -> bool:
    return not any(c.dst == s.name for c in net.channels)


class _Simulation:
    def __init__(
        self, net: Network, horizon: float, rng: np.random.Generator, resample: bool
    ) -> None:
        self.net, self.horizon, self.rng = net, horizon, rng
        cidx = {c.name: i for i, c in enumerate(net.channels)}
        sidx = {s.name: i for i, s in enumerate(net.stages)}
        self.chans = [_Chan(c.capacity, float(c.delay_ns)) for c in net.channels]
        for ch in self.chans:
            ch.levels = [0.0] * (ch.cap + 1)
        locks = sorted({s.interpreter for s in net.stages})
        lidx = {name: i for i, name in enumerate(locks)}
        self.lock_names = locks
        self.lock_holder = [-1] * len(locks)
        self.lock_wait: list[deque[int]] = [deque() for _ in locks]
        self.lock_busy = [0.0] * len(locks)
        self.lock_since = [0.0] * len(locks)
        self.cores_free = net.cores
        self.core_wait: deque[int] = deque()
        self.cores_busy = 0.0
        self.workers: list[_Worker] = []
        for s in net.stages:
            pool = np.asarray(s.service, dtype=np.float64)
            if resample:
                pool = rng.choice(pool, size=len(pool), replace=True)
            w = _Worker(
                idx=sidx[s.name],
                service=pool / s.speed,
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
            )
            if not w.ins:
                w.left = s.items if s.items > 0 else -1
            self.workers.append(w)
        self.draws = [self._pool(w) for w in self.workers]
        self.heap: list[tuple[float, int, int, int]] = []
        self.seq = 0
        self.now = 0.0
        self.bg_wait = 0  # background jobs waiting for a core
        self.live = 0  # events of the stages in the heap (the background's go on for ever)
        self.finished = 0  # stages done

    def _pool(self, w: _Worker) -> F64:
        """Service times in the order the worker will use them (drawn up front, refilled)."""
        return self.rng.choice(w.service, size=4096, replace=True)

    def _at(self, t: float, kind: int, who: int) -> None:
        self.seq += 1
        if kind != _BACKGROUND:
            self.live += 1
        heapq.heappush(self.heap, (t, self.seq, kind, who))

    def _set(self, w: _Worker, state: int) -> None:
        w.spent[w.state] += self.now - w.since
        w.state, w.since = state, self.now

    def _level(self, ch: _Chan, delta: int) -> None:
        n = len(ch.items)
        ch.levels[n] += self.now - ch.level_t
        ch.level_t = self.now
        del delta  # the caller changes ``items`` right after

    # -- the run ---------------------------------------------------------------------------

    def run(self) -> SimResult:
        for w in self.workers:
            self._at(0.0, _START, w.idx)
        if self.net.background_cores > 0:
            self._at(self._bg_gap(), _BACKGROUND, -1)
        heap = self.heap
        while heap:
            t, _, kind, who = heapq.heappop(heap)
            if t > self.horizon:
                self.now = self.horizon
                break
            self.now = t
            if kind == _BACKGROUND:
                self._background(who)
                continue
            self.live -= 1
            w = self.workers[who]
            if kind == _CPU_DONE:
                self._cpu_done(w)
            elif kind == _FREE_DONE:
                self._emit(w)
            elif kind == _RETRY_GET:
                self._get(w)
            elif kind == _CORE_DONE:
                self._release_core()
                self._after_cpu(w)
            else:
                self._set(w, BUSY)
                if w.ins:
                    self._get(w)
                else:
                    self._serve(w)
            if self.finished == len(self.workers) or (
                not self.live and self.bg_wait == len(self.core_wait)
            ):
                break  # all done, or stuck (every stage waiting on another)
        return self._result()

    def _bg_gap(self) -> float:
        job = self.net.background_job_ns
        return float(self.rng.exponential(job / self.net.background_cores))

    def _background(self, who: int) -> None:
        """A background job: ``who`` -1 arrives (and asks for a core), >= 0 ends."""
        if who < 0:
            self._at(self.now + self._bg_gap(), _BACKGROUND, -1)
            if self.cores_free > 0:
                self.cores_free -= 1
                self._at(self.now + self.net.background_job_ns, _BACKGROUND, 0)
            else:
                self.bg_wait += 1
                self.core_wait.append(-1)
            return
        self._release_core()

    def _release_core(self) -> None:
        if self.core_wait:
            nxt = self.core_wait.popleft()
            if nxt < 0:
                self.bg_wait -= 1
                self._at(self.now + self.net.background_job_ns, _BACKGROUND, 0)
            else:
                self._run_cpu(self.workers[nxt])
        else:
            self.cores_free += 1

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
                self._level(ch, -1)
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
            if ch.items:  # in flight on a link: ready later
                self._set(w, BLOCKED_IN)
                self._at(ch.items[0], _RETRY_GET, w.idx)
                return
            self._set(w, BLOCKED_IN)
            ch.getter = w.idx
            return

    def _drained(self, ci: int) -> bool:
        ch = self.chans[ci]
        return ch.ended and not ch.items

    def _room(self, ci: int) -> None:
        """An item left channel ``ci``: the first stage waiting to put into it puts now."""
        p = self.workers[self.chans[ci].putters.popleft()]
        self._put_one(p, ci)
        self._at(self.now, _FREE_DONE, p.idx)  # go on with its other outputs

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
            self._want_lock(w)
        elif w.unlocked > 0:
            self._want_core(w)
        else:
            self._at(self.now + w.free, _FREE_DONE, w.idx)

    def _want_lock(self, w: _Worker) -> None:
        lk = w.lock
        if self.lock_holder[lk] < 0:
            self.lock_holder[lk] = w.idx
            self.lock_since[lk] = self.now
            self._want_core(w)
        else:
            self.lock_wait[lk].append(w.idx)

    def _want_core(self, w: _Worker) -> None:
        if self.cores_free > 0:
            self.cores_free -= 1
            self._run_cpu(w)
        else:
            self.core_wait.append(w.idx)

    def _run_cpu(self, w: _Worker) -> None:
        """A core is the worker's: its locked part (it holds the lock), else its unlocked one."""
        if w.cpu > 0:
            self.cores_busy += w.cpu
            self._at(self.now + w.cpu, _CPU_DONE, w.idx)
        else:
            self.cores_busy += w.unlocked
            self._at(self.now + w.unlocked, _CORE_DONE, w.idx)

    def _after_cpu(self, w: _Worker) -> None:
        w.unlocked = 0.0
        if w.free > 0:
            self._at(self.now + w.free, _FREE_DONE, w.idx)
        else:
            self._emit(w)

    def _cpu_done(self, w: _Worker) -> None:
        lk = w.lock
        w.cpu = 0.0
        if w.unlocked > 0:  # the lock goes, the core stays for the unlocked part
            self.cores_busy += w.unlocked
            self._at(self.now + w.unlocked, _CORE_DONE, w.idx)
        else:
            self._release_core()
        self.lock_busy[lk] += self.now - self.lock_since[lk]
        self.lock_holder[lk] = -1
        if self.lock_wait[lk]:
            nxt = self.workers[self.lock_wait[lk].popleft()]
            self.lock_holder[lk] = nxt.idx
            self.lock_since[lk] = self.now
            self._want_core(nxt)
        if w.unlocked <= 0:
            self._after_cpu(w)

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
                return
            self._put_one(w, ci)
        w.pending = 0
        if w.ins:
            self._set(w, BUSY)
            self._get(w)
        elif w.left != 0 and not self._left_horizon():
            if w.left > 0:
                w.left -= 1
            if w.left == 0:
                self._finish(w)
            else:
                self._serve(w)
        else:
            self._finish(w)

    def _left_horizon(self) -> bool:
        return self.now >= self.horizon

    def _put_one(self, w: _Worker, ci: int) -> None:
        ch = self.chans[ci]
        self._level(ch, +1)
        ch.items.append(self.now + ch.delay)
        ch.puts.append(self.now)
        w.rr_out += 1
        if w.broadcast:
            if w.rr_out % len(w.outs) == 0:
                w.pending -= 1
        else:
            w.pending -= 1
        if ch.getter >= 0:
            g = ch.getter
            ch.getter = -1
            self._at(max(self.now, ch.items[-1]), _RETRY_GET, g)

    def _finish(self, w: _Worker) -> None:
        if w.done:
            return
        self._set(w, IDLE)
        w.done = True
        self.finished += 1
        for ci in w.outs:
            ch = self.chans[ci]
            ch.ended = True
            if ch.getter >= 0:
                g = ch.getter
                ch.getter = -1
                self._at(self.now, _RETRY_GET, g)

    def _result(self) -> SimResult:
        end = self.now
        for w in self.workers:
            self._set(w, w.state)
        for ch in self.chans:
            self._level(ch, 0)
        for lk, holder in enumerate(self.lock_holder):
            if holder >= 0:
                self.lock_busy[lk] += end - self.lock_since[lk]
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
            lock_busy=dict(zip(self.lock_names, self.lock_busy, strict=True)),
            cores_busy=self.cores_busy,
        )
