"""Synthetic but lawful probe traffic for monitor benchmarks.

In: a seed and how many events to make. Out: the agent messages a real run of a four-stage chain
would send (START, then BATCH messages of ~64k records, one per 50 ms flush window, with the
agent's watermark rule), generated window by window so that no run needs all of it in memory.

Every channel obeys FIFO and its capacity: insertion and removal ticks increase, sequence numbers
increase by one, removal k follows insertion k, and insertion k + capacity follows removal k.
The load swings slowly, so occupancy sweeps most of ``0..capacity``. Stages change state at
Poisson times, each record a real change (as ``StateTracker`` writes them).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from streamscope import Pipeline
from streamscope.core.records import Kind, Records, empty_records, make_records
from streamscope.core.topology import Topology
from streamscope.monitor.engine import Engine, FrameSink
from streamscope.query.plan import Plan
from streamscope.runtime.session import prepare
from streamscope.transport.wire import Message, MsgType

I64 = NDArray[np.int64]
_E: I64 = np.zeros(0, dtype=np.int64)

STAGES = ("src", "parse", "enrich", "sink")
CAPACITY = 64
FRAME_NS = 100_000_000  # 100 ms of synthetic time
FLUSH_NS = 50_000_000  # one batch per agent flush interval
T0_TICKS = 1_000_000_000_000  # host monotonic ns at START (any value works)
#: Stage state changes per second, each stage.
STATE_RATE_HZ = 20_000
#: Records wanted per batch; channel rates are derived from it.
BATCH_RECORDS = 1 << 16

QUERIES = (
    "occupancy(* -> *): mean, max, histogram(bins=0..64) every 100ms",
    "throughput(* -> *): mean, max every 100ms",
    "latency(* -> *): mean, p50, p99, quantiles(0.9, 0.999) every 100ms",
    "interinsertion(* -> *): mean, p99 every 100ms",
    "state(*): duty every 100ms",
)


@dataclass(frozen=True, slots=True)
class Scenario:
    plan: Plan
    topology: Topology
    n_probes: int


def scenario() -> Scenario:
    """Queries compiled against a real ``Pipeline`` (src -> parse -> enrich -> sink)."""
    p = Pipeline("bench")
    p.add("src", range(1))
    for s in STAGES[1:]:
        p.add(s, lambda x: x)
    p.chain(*STAGES, capacity=CAPACITY)
    plan, topology = prepare(p, list(QUERIES), FRAME_NS)
    return Scenario(plan, topology, len(topology.probes))


def engine(sc: Scenario, sink: FrameSink) -> Engine:
    """A fresh engine that has seen START (t0 = ``T0_TICKS``)."""
    e = Engine(sc.plan, sc.topology, FRAME_NS, sink)
    e.handle(Message(MsgType.START, 0, 0, T0_TICKS, empty_records(), {}))
    return e


class _Channel:
    """One channel's insertions and removals, made ahead in blocks and handed out by time."""

    def __init__(self, rng: np.random.Generator, rate_hz: float, phase: float) -> None:
        self.rng = rng
        self.gap_ns = 1e9 / rate_hz
        self.phase = phase
        self.seq = 0  # items inserted so far
        self.last_p = T0_TICKS
        self.pend_p = _E  # insertions whose removal waits for the insertion CAPACITY later
        self.last_d = T0_TICKS  # last departure of the server (uncapped)
        self.puts: list[I64] = []
        self.gets: list[I64] = []
        self.put_seq = 1  # sequence number of the first insertion still buffered
        self.get_seq = 1
        self.last_g = T0_TICKS

    def _extend(self, n: int) -> None:
        gaps = self.rng.exponential(self.gap_ns, n).astype(np.int64) + 1
        p = self.last_p + np.cumsum(gaps)
        self.last_p = int(p[-1])
        self.seq += n
        self.puts.append(p)
        allp = np.concatenate((self.pend_p, p))
        ready, ahead = allp[:-CAPACITY], allp[CAPACITY:]
        # A single server (Lindley: d_k = max(p_k, d_k-1) + s_k, vectorised through the prefix
        # sums of service), whose load swings between 0.55 and 0.95 over ~1.3 s.
        rho = 0.75 + 0.2 * np.sin(2 * np.pi * (ready - T0_TICKS) / 1.3e9 + self.phase)
        service = (self.rng.exponential(self.gap_ns, len(ready)) * rho).astype(np.int64) + 1
        cum = np.cumsum(service)
        start = np.maximum.accumulate(np.maximum(ready - (cum - service), self.last_d))
        d = start + cum
        self.last_d = int(d[-1])
        g = np.minimum(d, ahead - 1)  # capacity: both non-decreasing, so g is too
        self.gets.append(g)
        self.last_g = int(g[-1])
        self.pend_p = allp[-CAPACITY:]

    def take(self, until: int) -> tuple[I64, I64, I64, I64]:
        """Insertions and removals before ``until``: (put ticks, put seq, get ticks, get seq)."""
        block = max(1024, int(FLUSH_NS / self.gap_ns))
        while self.last_p < until or self.last_g < until:
            self._extend(block)
        pt, self.put_seq, self.puts = _cut(self.puts, until, self.put_seq)
        gt, self.get_seq, self.gets = _cut(self.gets, until, self.get_seq)
        ps = np.arange(self.put_seq - len(pt), self.put_seq, dtype=np.int64)
        gs = np.arange(self.get_seq - len(gt), self.get_seq, dtype=np.int64)
        return pt, ps, gt, gs


def _cut(parts: list[I64], until: int, first_seq: int) -> tuple[I64, int, list[I64]]:
    t = np.concatenate(parts)
    k = int(np.searchsorted(t, until, side="left"))
    return t[:k], first_seq + k, [t[k:]]


class _Stage:
    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.state = 0

    def take(self, lo: int, hi: int) -> tuple[I64, I64]:
        n = int(self.rng.poisson(STATE_RATE_HZ * (hi - lo) / 1e9))
        t = np.sort(self.rng.integers(lo, hi, n, dtype=np.int64))
        # Each record is a change: add 1..3 modulo 4 to the previous state.
        s = (self.state + np.cumsum(self.rng.integers(1, 4, n))) % 4
        if n:
            self.state = int(s[-1])
        return t, s.astype(np.int64)


def messages(sc: Scenario, n_events: int, seed: int = 2) -> Iterator[Message]:
    """BATCH messages, one per flush window, until at least ``n_events`` records were sent.

    The records of a window are grouped by probe, as ``Agent`` sends them; the watermark is the
    window's start (the agent's previous flush).
    """
    rng = np.random.default_rng(seed)
    per_window_state = STATE_RATE_HZ * FLUSH_NS / 1e9 * len(STAGES)
    n_chan = len(STAGES) - 1
    rate = (BATCH_RECORDS - per_window_state) / (2 * n_chan) / (FLUSH_NS / 1e9)
    chans = {
        f"{a} -> {b}": _Channel(rng, rate, i) for i, (a, b) in enumerate(itertools.pairwise(STAGES))
    }
    stages = {s: _Stage(rng) for s in STAGES}
    sent = 0
    lo = T0_TICKS
    while sent < n_events:
        hi = lo + FLUSH_NS
        cols = {name: c.take(hi) for name, c in chans.items()}
        sts = {name: s.take(lo, hi) for name, s in stages.items()}
        parts: list[Records] = []
        for probe in sc.topology.probes:
            if probe.kind == "tail":
                pt, ps, _, _ = cols[probe.target]
                parts.append(make_records(int(Kind.PUT), probe.id, pt, ps))
            elif probe.kind == "head":
                _, _, gt, gs = cols[probe.target]
                parts.append(make_records(int(Kind.GET), probe.id, gt, gs))
            else:
                st, sv = sts[probe.target]
                parts.append(make_records(int(Kind.STATE), probe.id, st, sv))
        rec = np.concatenate(parts)
        sent += len(rec)
        yield Message(MsgType.BATCH, 0, 0, lo, rec, {})
        lo = hi


def end_ns(last: Message) -> int:
    """The run's end in virtual ns: the end of the last message's window."""
    return last.watermark + FLUSH_NS - T0_TICKS
