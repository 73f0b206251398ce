"""The monitor's capacity for many hosts: frame summaries against raw records, on paper and
measured.

In: simulated host agents, each watching ``CHANNELS`` channels whose two ends it reduces into one
frame summary per end and 1 s frame (``SubQueueFrames`` over Poisson insertions and exponential
services at a given rate of items per second per channel), encoded as agents send them (SUMMARY
wire messages). Out: the bytes a host ships per frame as summaries and as raw records (24 bytes
a record: one insertion and one removal per item); measured on one core, the monitor's cost to
take one host-frame in each form (summaries: wire decode, summary decode, handed to the channel's
virtual queue; raw records: wire decode, routing into channel streams and reduction to frames
by the engine, ``bench_reduction``'s path); and from them, how many hosts one monitor core takes
at 1 s frames, for 100 and 1000 hosts of ``CHANNELS`` channels. Then the frames a host closes
itself (queries whose taps all lie on it: occupancy, throughput and latency of ``CHANNELS``
channels between its own stages, reduced by ``agents.host``): their bytes per frame, and
the monitor's cost to take them (wire decode, frames decode, each frame's edges mapped through the
host's clock for its bounds). The virtual queues' estimation
(a simulation per channel and frame) is measured apart: it is what limits a host's channels, not
their transport; it is measured with the model's compiled loops and, beside it, with the numpy
twins of those compiled since it took ~0.25 s (``COMPILED_SINCE``).

    python benchmarks/bench_hosts.py [--quick] [--reps N]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import numpy as np

import _synth
from _harness import interleave, machine, parse_args, table
from streamscope.agents.host import HostFrames
from streamscope.aggregate.points import DropCount, FrameResult, ScalarPoint
from streamscope.aggregate.shipped import decode_frames
from streamscope.aggregate.specs import Mean
from streamscope.aggregate.subqueue import (
    PROFILE_BINS,
    SubQueueFrames,
    SubQueueSummary,
    decode_summaries,
    encode_summaries,
)
from streamscope.core.process import keep_freed_memory
from streamscope.core.records import RECORD_DTYPE, Kind, make_records
from streamscope.core.topology import ChannelInfo, Topology
from streamscope.model import bulk, dependence, occupancy, replay, sampling
from streamscope.monitor.virtual import VirtualQueue
from streamscope.runtime.session import host_pairs, prepare
from streamscope.timebase.domains import Domains
from streamscope.transport.wire import MsgType, decode, encode

CHANNELS = 50
FRAME_NS = 1_000_000_000
RATES = (1_000, 10_000, 100_000)  # items per second per channel
HOSTS = (100, 1000)


def summaries(rate: int, seed: int) -> tuple[SubQueueSummary, SubQueueSummary]:
    """One frame of a channel at ``rate`` items/s (utilisation 0.7): its tail and head ends'
    summaries, as a host's agent reduces them (the head's side starts at the bus's end)."""
    rng = np.random.default_rng(seed)
    n = rate
    t_in = np.cumsum(rng.exponential(1e9 / rate, n)).astype(np.int64)
    t_in = t_in[t_in < FRAME_NS]
    seq = np.arange(1, len(t_in) + 1, dtype=np.int64)
    service = rng.exponential(0.7e9 / rate, len(t_in))
    done = np.empty(len(t_in))
    free = 0.0
    for i, t in enumerate(t_in.tolist()):  # a FIFO server (a benchmark's input, not its cost)
        free = max(free, float(t)) + float(service[i])
        done[i] = free
    t_out = np.minimum(done, FRAME_NS - 1).astype(np.int64)
    out = []
    for ins, rem in ((t_in, t_in + 1), (t_in + 2, t_out + 3)):
        sq = SubQueueFrames(1.0, profile=PROFILE_BINS)
        sq.set_grid(0.0, float(FRAME_NS))
        sq.add_insertions(np.minimum(ins, FRAME_NS - 1), seq)
        sq.add_removals(np.minimum(rem, FRAME_NS - 1), seq)
        (summary,) = sq.close_until(FRAME_NS)
        out.append(summary)
    return out[0], out[1]


#: Distinct channels simulated per rate; a host's channels cycle through them (their summaries
#: cost the monitor the same to take, and simulating 50 at 100 k items/s is slow).
DISTINCT = 5


def host_frame(rate: int) -> list[bytes]:
    """One host's messages for one frame: a SUMMARY per channel end."""
    made = [summaries(rate, seed) for seed in range(DISTINCT)]
    msgs = []
    for ch in range(CHANNELS):
        tail, head = made[ch % DISTINCT]
        for side, s in enumerate((tail, head)):
            body = encode_summaries(2 * ch + side, [s])
            msgs.append(encode(MsgType.SUMMARY, 1, 1, FRAME_NS, payload=body))
    return msgs


def absorb(msgs: Sequence[bytes], frames: int) -> tuple[float]:
    """The monitor's receive path for summaries, ``frames`` host-frames of ``msgs``: seconds of
    CPU per host-frame."""
    got: dict[int, dict[int, SubQueueSummary]] = {}
    t0 = time.process_time_ns()
    for f in range(frames):
        for m in msgs:
            key, summ = decode_summaries(decode(m).payload)
            for s in summ:
                got.setdefault(key, {})[f] = s  # as VirtualQueue.add_summaries keeps them
    return ((time.process_time_ns() - t0) / 1e9 / frames,)


def raw_cost(quick: bool) -> float:
    """CPU seconds per raw record through the engine (``bench_reduction``'s path)."""
    sc = _synth.scenario()
    msgs = list(_synth.messages(sc, 400_000 if quick else 2_000_000))
    events = sum(len(m.records) for m in msgs)
    wire = [encode(m.type, m.agent, m.pid, m.watermark, m.records) for m in msgs]

    def sink(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
        pass

    engine = _synth.engine(sc, sink)
    t0 = time.process_time_ns()
    for b in wire:
        engine.handle(decode(b))
        engine.advance()
    engine.finish(_synth.end_ns(msgs[-1]))
    return (time.process_time_ns() - t0) / 1e9 / events


#: The estimation's loops compiled since it was ~0.25 s a channel-frame, by module: with them
#: set to None it runs their numpy twins, as where the extension was not built.
COMPILED_SINCE = {
    sampling: ("HISTOGRAM_DRAWS", "PROFILE_TIMES", "PCG64_DOUBLES", "PCG64_HISTOGRAM_DRAWS"),
    occupancy: ("OCCUPANCY_SORTED",),
    dependence: ("WINDOW_COUNTS",),
    bulk: ("TRANSFER_ITEMS",),
    replay: ("TANDEM_FRAME",),
}


@contextmanager
def numpy_twins() -> Iterator[None]:
    """The loops of ``COMPILED_SINCE`` in numpy while inside (the same estimate: the tests hold
    them equal, bit for bit)."""
    saved = {(m, name): getattr(m, name) for m, names in COMPILED_SINCE.items() for name in names}
    for m, name in saved:
        setattr(m, name, None)
    try:
        yield
    finally:
        for (m, name), loop in saved.items():
            setattr(m, name, loop)


def estimation_cost(rate: int, reps: int = 3) -> float:
    """CPU seconds to estimate one virtual queue's frame from its two summaries (the least of
    ``reps`` runs, after one to warm up: the machine may be shared), with this process's malloc
    set as the monitor's is (``keep_freed_memory``)."""
    keep_freed_memory()
    return min(_estimate_once(rate) for _ in range(reps + 1))


def _estimate_once(rate: int) -> float:
    tail, head = summaries(rate, 7)
    ch = ChannelInfo("a -> b", "a", "b", 4096, "link", 1, 0.0, 0.0, None)
    sides = {"tail": ("hosta", 1, 2, 0), "head": ("hostb", 3, 4, 0)}
    vq = VirtualQueue(ch, 0, [(0, (Mean(),))], FRAME_NS, sides, None)
    vq.add_summaries("tail", [tail])
    vq.add_summaries("head", [head])
    domains = Domains(Topology("t"))
    domains.start(0)
    t0 = time.process_time_ns()
    vq.finish(FRAME_NS, _SameClock(domains), None)
    return (time.process_time_ns() - t0) / 1e9


class _SameClock:
    """The hosts' clocks as the monitor's (this measures the model, not the calibration)."""

    def __init__(self, domains: Domains) -> None:
        self.host = domains.host

    def to_ns(self, domain: str, ticks: np.ndarray) -> tuple[np.ndarray, float]:
        return ticks.astype(np.int64), 0.0


FRAME_QUERIES = [
    "occupancy(* -> *): mean, max, histogram every 1s",
    "throughput(* -> *) every 1s",
    "latency(* -> *): mean, box every 1s",
]


def own_frames(rate: int) -> tuple[list[bytes], int]:
    """One host's frames for one 1 s frame: ``CHANNELS`` channels between its own stages at
    ``rate`` items/s each, reduced there (the messages, and the records they stand for)."""
    import streamscope as ss

    p = ss.Pipeline("own")
    host = ss.Host("node-a")
    p.add("s0", range(1), resource=host)
    for i in range(CHANNELS):
        p.add(f"s{i + 1}", lambda x: x, resource=host)
        p.connect(f"s{i}", f"s{i + 1}", capacity=64)
    plan, topo = prepare(p, FRAME_QUERIES, FRAME_NS)
    (pairs,) = host_pairs(plan).values()
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    frames.set_grid(0.0, 1.0)
    rng = np.random.default_rng(5)
    parts = []
    t_in = np.zeros(0, np.int64)
    for pr in topo.probes:  # each channel's tail, then its head
        if pr.kind in ("tail", "head"):
            if pr.kind == "tail":
                t_in = np.sort(rng.integers(0, FRAME_NS - 10_000_000, rate))
                t = t_in
            else:  # each item out a little later, in order
                t = np.maximum.accumulate(t_in + rng.exponential(1e9 / rate / 2, rate).astype(int))
            kind = Kind.PUT if pr.kind == "tail" else Kind.GET
            parts.append(make_records(int(kind), pr.id, t, np.arange(1, rate + 1)))
    records = np.concatenate(parts)
    frames.add(records)
    payloads = frames.close_until(FRAME_NS + 1)
    return [encode(MsgType.SUMMARY, 1, 1, FRAME_NS, payload=b) for b in payloads], len(records)


def absorb_frames(msgs: Sequence[bytes], frames: int, domains: Domains) -> tuple[float]:
    """The monitor's receive path for a host's own frames (``Engine._take_host_frames``):
    seconds of CPU per host-frame."""
    kept = []
    t0 = time.process_time_ns()
    for _ in range(frames):
        for m in msgs:
            for f in decode_frames(decode(m).payload):
                r = f.result
                edges = np.array([f.lo_ticks, f.hi_ticks], np.int64)
                t, hw = domains.to_ns_each("host", edges)
                off = max(abs(int(t[0]) - r.t_start_ns), abs(int(t[1]) - r.t_end_ns))
                quality = (ScalarPoint("violations", 0.0),
                           ScalarPoint("uncertainty_ns", float(off + hw.max())))  # fmt: skip
                kept.append(dataclasses.replace(r, points=r.points + quality))
    return ((time.process_time_ns() - t0) / 1e9 / frames,)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (3 if args.quick else 5)
    frames = 3 if args.quick else 20
    print(machine())
    per_record = raw_cost(args.quick)
    rows = []
    summary_cost: dict[int, float] = {}
    for rate in RATES:
        msgs = host_frame(rate)
        (s,) = interleave([("absorb", lambda m=msgs: absorb(m, frames))], reps)[0]
        summary_cost[rate] = s.median
        sum_bytes = sum(len(m) for m in msgs)
        raw_bytes = 2 * rate * CHANNELS * RECORD_DTYPE.itemsize
        raw_s = 2 * rate * CHANNELS * per_record
        rows.append(
            [f"{rate:,}", f"{sum_bytes / 1e3:,.1f}", f"{raw_bytes / 1e6:,.2f}",
             f"{raw_bytes / sum_bytes:,.0f}x", f"{s.median * 1e3:.2f}", f"{raw_s * 1e3:,.1f}",
             f"{raw_s / s.median:,.0f}x", f"{1 / s.median:,.0f}", f"{1 / raw_s:,.1f}"]
        )  # fmt: skip
    print(
        table(
            ["items/s/channel", "summaries kB", "raw MB", "bytes saved", "summaries ms",
             "raw ms", "CPU saved", "hosts/core (summ.)", "hosts/core (raw)"],
            rows,
        )
    )  # fmt: skip
    print(
        f"per host and 1 s frame, {CHANNELS} channels; CPU per host-frame on one monitor core "
        f"(raw: {per_record * 1e9:.0f} ns a record through the engine)"
    )
    worst = max(summary_cost.values())
    for hosts in HOSTS:
        need = hosts * worst
        said = "meets" if need <= 1.0 else "misses"
        print(
            f"target: {hosts} hosts x {CHANNELS} channels at 1 s frames absorbed by one core: "
            f"{said} ({need:.2f} core-s per s of summaries; {hosts * CHANNELS * 2:,} summaries/s)"
        )
    domains = Domains(Topology("t"))
    domains.start(0)
    rows = []
    for rate in RATES[:2]:
        msgs, n_records = own_frames(rate)
        (s,) = interleave([("frames", lambda m=msgs: absorb_frames(m, frames, domains))], reps)[0]
        own_bytes = sum(len(m) for m in msgs)
        raw_bytes = n_records * RECORD_DTYPE.itemsize
        raw_s = n_records * per_record
        rows.append(
            [f"{rate:,}", f"{own_bytes / 1e3:,.1f}", f"{raw_bytes / 1e6:,.2f}",
             f"{raw_bytes / own_bytes:,.0f}x", f"{s.median * 1e3:.2f}", f"{raw_s * 1e3:,.1f}",
             f"{raw_s / s.median:,.0f}x", f"{1 / s.median:,.0f}"]
        )  # fmt: skip
    print(
        table(
            ["items/s/channel", "own frames kB", "raw MB", "bytes saved", "frames ms",
             "raw ms", "CPU saved", "hosts/core (frames)"],
            rows,
        )
    )  # fmt: skip
    print(
        f"a host's own frames: {len(FRAME_QUERIES)} queries on each of {CHANNELS} channels "
        "between its stages, per 1 s frame (their size does not grow with the rate)"
    )
    est = estimation_cost(RATES[1])
    with numpy_twins():
        est_np = estimation_cost(RATES[1], reps=1)
    print(
        f"virtual-queue estimation: {est * 1e3:.0f} ms of CPU per channel and frame at "
        f"{RATES[1]:,} items/s ({est_np * 1e3:.0f} ms with its draws, occupancy and counts in "
        f"numpy, {est_np / est:.1f}x), so one core estimates {1 / est:,.0f} channels at 1 s "
        "frames (the limit past a few hosts: estimation spreads over processes by channel, or "
        "runs only for the channels queried)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
