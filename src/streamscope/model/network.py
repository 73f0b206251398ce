"""A whole pipeline as a queueing network, simulated event by event: what the what-if
predictions run (``analysis.whatif``).

In: a ``Network`` — stages (each a thread, or a pool of ``workers`` identical threads or
processes, drawing its service times from measured samples, the part of them that holds its
interpreter's lock, its per-item overhead, its outputs per input, its fan-out and fan-in
rules), bounded FIFO channels between them (blocking after service: a stage whose output is
full holds its item until there is room), the interpreters whose lock each stage's CPU time
needs, and the machine's cores. Out: ``simulate(...)``, a ``SimResult``: each channel's
insertion and removal times and its time-weighted occupancy levels, each stage's time in each
state (its workers' summed), each lock's and the cores' busy time.

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

A stage of ``workers`` > 1 is a pool on shared queues (threads on one ``queue.Queue``, a
``multiprocessing.Pool``): that many identical workers, each drawing its own service times from
the stage's samples and following the rules above on its own (its own round-robin turns, its own
credit of outputs per input), all taking from the stage's input channels and putting into its
output channels. An item wakes the worker that has waited for one the longest (a worker that
comes to the channel before that one has its lock back takes it first, as with ``queue.Queue``,
and the woken one waits again); room in a full channel goes to the worker that has waited for it
the longest. A channel ends (its consumers finish once it is empty) when the last worker of its
producer stage has finished; a source's items are split among its workers. Its workers share its
interpreter's lock (threads of one process) or, ``own_interpreters``, each has one of its own
(processes: the locks ``f"{interpreter}#{k}"``).

The event loop is in ``_netloop`` (Python) and ``_network.c`` (compiled, ``_netsim``), which
agree bit for bit; this module holds the model, the result and ``simulate``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from streamscope.model._inputs import ModelInputError
from streamscope.model._netloop import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    COMPILED,
    DEFAULT_SWITCH_NS,
    F64,
    IDLE,
    STATES,
    Raw,
    Simulation,
)

__all__ = [
    "BLOCKED_IN",
    "BLOCKED_OUT",
    "BUSY",
    "COMPILED",
    "DEFAULT_SWITCH_NS",
    "F64",
    "IDLE",
    "STATES",
    "ChannelModel",
    "Network",
    "SimResult",
    "StageModel",
    "putters",
    "simulate",
    "takers",
]


@dataclass(frozen=True, slots=True)
class StageModel:
    """One stage: a thread, or a pool of ``workers``. ``service``: samples of the wall time its
    own code takes on one item (ns; a source: one step of its generator), drawn with
    replacement; ``cpu_share``: the fraction of it that is CPU time (holds the lock and a core);
    ``overhead_ns``: CPU time per item outside its own code (the runner, the channels, the
    probes); ``ratio``: items it puts per item it takes (a source: 1); ``interpreter``: whose
    lock its CPU time needs; ``items``: a source's items (0: as many as the horizon allows);
    ``speed``: its own code's speed-up (2: twice as fast)."""

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
    #: The stage runs as this many identical workers (a pool of threads or processes on shared
    #: queues), each drawing its own service times from ``service``, all taking from its input
    #: channels and putting into its output channels; a source's ``items`` are split among
    #: them (the first ones get the remainder).
    workers: int = 1
    #: Each worker has an interpreter (lock) of its own, ``f"{interpreter}#{k}"`` (a process
    #: pool), its switch interval ``interpreter``'s unless ``Network.switch_ns`` names it; else
    #: all share ``interpreter``'s lock (threads of one process).
    own_interpreters: bool = False
    #: Its workers begin this long after the others that begin first (ns): a program's stage
    #: begins as the program starts it (a process pool's workers when it forks them, some
    #: tens of ms after the first call handed to them), idle till then.
    start_ns: float = 0.0


@dataclass(frozen=True, slots=True)
class ChannelModel:
    """A bounded FIFO from ``src`` to ``dst`` holding at most ``capacity`` items; an item can be
    taken ``delay_ns`` after it was put at the earliest. ``more_src`` / ``more_dst``: other
    stages that put into it / take from it too (a program's queue shared by several stages:
    it ends once every worker of them all that puts into it has finished)."""

    name: str
    src: str
    dst: str
    capacity: int
    delay_ns: float = 0.0
    more_src: tuple[str, ...] = ()
    more_dst: tuple[str, ...] = ()


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
    #: Each interpreter's switch interval (ns; ``sys.getswitchinterval``), 5 ms where not given
    #: (a worker's own interpreter: its stage's interpreter's where not given).
    switch_ns: dict[str, float] = field(default_factory=dict)
    #: The stages whose takes measure a program's rate (empty: its sinks; what-if's
    #: ``programrun.rate_stages``).
    rate_at: tuple[str, ...] = ()

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
            if not {c.src, c.dst, *c.more_src, *c.more_dst} <= names:
                raise ModelInputError(f"channel {c.name!r} joins a stage the network lacks")
            if c.capacity < 1:
                raise ModelInputError(f"channel {c.name!r}: capacity must be at least 1")
        for s in self.stages:
            if len(s.service) == 0 or not np.all(np.isfinite(s.service)) or s.service.min() < 0:
                raise ModelInputError(f"stage {s.name!r}: needs service-time samples >= 0 (ns)")
            if not s.speed > 0:
                raise ModelInputError(f"stage {s.name!r}: speed must be > 0, not {s.speed}")
            if not isinstance(s.workers, int) or s.workers < 1:
                raise ModelInputError(f"stage {s.name!r}: needs at least 1 worker, not {s.workers}")
        if self.cores < 1:
            raise ModelInputError(f"a network needs at least 1 core, not {self.cores}")


@dataclass(frozen=True, slots=True)
class SimResult:
    """One simulated run. ``end_ns``: when the last stage ended (or the horizon);
    ``put_times`` / ``take_times``: per channel, when each item went in and came out;
    ``levels``: per channel, ns spent at each level 0..capacity; ``states``: per stage, ns in
    each of ``STATES`` from 0 to its end, summed over its workers; ``lock_busy``: per
    interpreter (a worker's own: ``f"{interpreter}#{k}"``), ns its lock was held;
    ``cores_busy``: core-ns the stages' CPU parts used; ``cpu``: per stage, the CPU time its
    CPU parts took, and ``runq`` the ns they were slowed by sharing the cores (their wall time
    less their work: the run queue's wait), each summed over its workers."""

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
    #: Per stage, its workers (its ``states`` add up to that many times its span).
    workers: dict[str, int] = field(default_factory=dict)

    def mean_occupancy(self, channel: str) -> float:
        lv = self.levels[channel]
        total = lv.sum()
        return float((lv * np.arange(len(lv))).sum() / total) if total > 0 else math.nan

    def shares(self, stage: str) -> F64:
        """The stage's share of its working time (busy + blocked) in each of ``STATES``: of its
        workers' time together, for a stage of several."""
        st = self.states[stage]
        work = st[BUSY] + st[BLOCKED_IN] + st[BLOCKED_OUT]
        return st / work if work > 0 else np.zeros(len(STATES))


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
    bootstrap replication: the spread of the results then includes the samples' own; a pool
    for each stage, its workers drawing from it). ``compiled``: the compiled event loop (None:
    where it was built), else the Python loop; both give the same result, bit for bit."""
    net.check()
    if math.isinf(horizon_ns) and any(s.items <= 0 for s in net.stages if _is_source(net, s)):
        raise ModelInputError("a source with no item count needs a finite horizon")
    if compiled and not COMPILED:
        raise ModelInputError("the compiled event loop was not built here")
    sim = Simulation(net, horizon_ns, np.random.default_rng(seed), resample)
    raw = sim.run_compiled() if (COMPILED if compiled is None else compiled) else sim.run()
    return _result(net, sim, raw)


def putters(c: ChannelModel) -> tuple[str, ...]:
    """Every stage that puts into ``c``."""
    return (c.src, *c.more_src)


def takers(c: ChannelModel) -> tuple[str, ...]:
    """Every stage that takes from ``c``."""
    return (c.dst, *c.more_dst)


def _is_source(net: Network, s: StageModel) -> bool:
    return not any(s.name in takers(c) for c in net.channels)


def _result(net: Network, sim: Simulation, raw: Raw) -> SimResult:
    """The loop's figures per stage: a stage's workers' summed (in their order; a single
    worker's as they are)."""
    names = [c.name for c in net.channels]
    states: dict[str, F64] = {}
    cpu: dict[str, float] = {}
    runq: dict[str, float] = {}
    for si, (spent, wq, worked) in zip(sim.stage_of, raw.workers, strict=True):
        n = net.stages[si].name  # (a stage's workers are in a row, the stages in their order)
        if n in states:
            states[n] = states[n] + spent
            runq[n] += wq
            cpu[n] += worked
        else:
            states[n], runq[n], cpu[n] = spent, wq, worked
    return SimResult(
        end_ns=raw.end,
        put_times={n: c[0] for n, c in zip(names, raw.chans, strict=True)},
        take_times={n: c[1] for n, c in zip(names, raw.chans, strict=True)},
        levels={n: c[2] for n, c in zip(names, raw.chans, strict=True)},
        states=states,
        lock_busy=dict(zip(sim.lock_names, raw.lock_busy, strict=True)),
        cores_busy=raw.cores_busy,
        cpu=cpu,
        runq=runq,
        complete=raw.finished == len(sim.workers) or raw.end >= sim.horizon,
        workers={s.name: s.workers for s in net.stages},
    )
