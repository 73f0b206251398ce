"""Cross-clock bounds through clock steps and changes of rate, against a truth known exactly.

An emulated device clock (random rate, offset, drift, tick; a step forward or back, a change
of rate, or both, at random times) is read by a simulated device: its removal records are the clock's
exact ticks at known host times, its calibration bursts round trips with random delays. The
monitor's engine gets them as it would live (records and bursts interleaved in time, frames
closing as the watermark passes) and, apart, all at once after the run (as ``retime`` does).
Out: the share of frames whose latency median and extremes lie within the frame's reported
uncertainty of the exact truth (a device tick's quantisation and ns rounding allowed for), live
and refitted, the worst excess, and any negative latency. Target: 100 %, none.

Unlike ``bench_clock_trials.py`` (real processes, the application's own stamps, whose noise
limits what it can resolve), nothing here is noisy: a miss is the model's.

    python benchmarks/bench_clock_exact.py [--quick] [--trials N] [--seed S] [--close] [--strict]

It exits 0 whatever the figures; with ``--strict`` (the test suite's use) it exits 1 when a
target is missed: nothing here is noisy, so a miss is a bug, not a measurement.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from _clocktruth import Tally, check
from _harness import machine, parser
from streamscope.aggregate.points import FrameResult
from streamscope.core.records import Kind, make_records
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.monitor.engine import Engine
from streamscope.query.compile import compile_queries
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.transport.wire import EXCHANGE_DTYPE, Message, MsgType

FRAME_NS = 100_000_000
RUN_NS = 1_200_000_000
BURST_EVERY_NS = 200_000_000
T0 = 5_000_000_000  # host ns at the run's start
QUERY = "latency(src -> work): p50, min, max every 100ms"


def topology() -> Topology:
    return Topology(
        "steps",
        resources=(ResourceInfo("main", "thread"), ResourceInfo("dev", "process", "dev")),
        stages=(StageInfo("src", "main", "source"), StageInfo("work", "dev", "sink")),
        channels=(ChannelInfo("src -> work", "src", "work", 64),),
        probes=(ProbeInfo(1, "tail", "src -> work"), ProbeInfo(2, "head", "src -> work", "dev")),
    )


def burst(clock: EmulatedClock, at: int, rng: np.random.Generator, n: int = 60) -> np.ndarray:
    """Round trips starting at host ns ``at``: request, the counter read on arrival, reply."""
    rows = np.zeros(n, dtype=EXCHANGE_DTYPE)
    t = at
    for i in range(n):
        up, down = (int(x) for x in rng.integers(2_000, 20_000, 2))
        rows[i] = (t, int(clock.ticks_at(np.array([t + up]))[0]), t + up + down)
        t += up + down + 5_000
    return rows


def msg(kind: MsgType, agent: int, watermark: int, records=None, info=None) -> Message:  # type: ignore[no-untyped-def]
    rec = (
        records
        if records is not None
        else make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    )
    return Message(kind, agent, 0, watermark, rec, dict(info or {}))


class Truth:
    """One simulated run: the host's insertion times, the device's removal times (host ns, the
    truth) and ticks, and the bursts."""

    def __init__(self, spec: EmulatedClockSpec, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.clock = EmulatedClock(spec, T0 - 300_000_000)  # the device started before the run
        gaps = rng.integers(300_000, 900_000, 4000)
        ins = T0 + 1_000_000 + np.cumsum(gaps)
        self.inserted = ins[ins < T0 + RUN_NS - 50_000_000]
        lat = rng.integers(50_000, 600_000, len(self.inserted))
        self.removed = np.maximum.accumulate(self.inserted + lat)  # FIFO: in order
        self.ticks = self.clock.ticks_at(self.removed)
        self.bursts = [
            (at, burst(self.clock, at, rng)) for at in range(T0, T0 + RUN_NS + 1, BURST_EVERY_NS)
        ]


def run_engine(truth: Truth, live: bool) -> list[FrameResult]:
    """Feed the engine as the monitor would: live, every 20 ms what happened by then; or, as
    ``retime`` does, every burst first and then every record."""
    out: list[FrameResult] = []
    topo = topology()
    plan = compile_queries([QUERY], topo, FRAME_NS).sited(topo, trace=False)
    eng = Engine(plan, topo, FRAME_NS, lambda frames, drops: out.extend(frames))
    eng.handle(msg(MsgType.START, 0, T0))
    eng.handle(msg(MsgType.HELLO, 0, T0, info={"domain": "host"}))
    eng.handle(msg(MsgType.HELLO, 1, T0, info={"domain": "dev"}))
    seq = np.arange(1, len(truth.inserted) + 1, dtype=np.int64)
    tail = make_records(int(Kind.PUT), 1, truth.inserted, seq)
    head = make_records(int(Kind.GET), 2, truth.ticks, seq)
    steps = range(T0, T0 + RUN_NS + 20_000_000, 20_000_000) if live else [T0 + RUN_NS]
    sent = {"tail": 0, "head": 0, "burst": 0}
    for now in steps:
        while sent["burst"] < len(truth.bursts):
            _at, rows = truth.bursts[sent["burst"]]
            if live and int(rows["t3_ns"][-1]) > now:
                break
            eng.handle(msg(MsgType.CALIBRATION, 1, 0, rows))
            sent["burst"] += 1
        for name, rec, times, agent in (
            ("tail", tail, truth.inserted, 0),
            ("head", head, truth.removed, 1),
        ):
            upto = int(np.searchsorted(times, now))
            if upto > sent[name]:
                part = rec[sent[name] : upto]
                wm = int(part["ticks"][-1])
                eng.handle(msg(MsgType.BATCH, agent, wm, part))
                sent[name] = upto
        if live:
            eng.advance()
    for _, rows in truth.bursts[sent["burst"] :]:  # the end burst, before the end
        eng.handle(msg(MsgType.CALIBRATION, 1, 0, rows))
    end_ticks = int(truth.clock.ticks_at(np.array([T0 + RUN_NS]))[0])
    eng.handle(msg(MsgType.END, 0, T0 + RUN_NS))
    eng.handle(msg(MsgType.END, 1, end_ticks))
    eng.finish(RUN_NS)
    return out


def random_spec(rng: np.random.Generator, close: bool = False) -> EmulatedClockSpec:
    """Rate ±100 ppm, offset ±1000 s, drift ±10 ppb/s, tick 1 ns – 2 µs; a step forward or
    back of 1 µs – 10 ms (log-uniform), a change of rate of up to ±100 ppm, or both, at random
    times inside the run. ``close``: always both, at most 400 ms (two bursts' gaps) apart."""
    what = 2 if close else int(rng.integers(3))
    rate_ppm, offset_s = float(rng.uniform(-100, 100)), float(rng.uniform(-1000, 1000))
    drift, tick = float(rng.uniform(-10, 10)), float(math.exp(rng.uniform(0, math.log(2000))))
    step_at, step_ns, rate_at, rate_step = None, 0.0, None, 0.0
    if what in (0, 2):
        step_at = float(rng.uniform(0.35, 1.2 if close else 1.4))
        step_ns = float(
            rng.choice([-1.0, 1.0]) * math.exp(rng.uniform(math.log(1e3), math.log(1e7)))
        )
    if what in (1, 2):
        if close and step_at is not None:
            rate_at = min(max(step_at + float(rng.uniform(-0.4, 0.4)), 0.3), 1.45)
        else:
            rate_at = float(rng.uniform(0.35, 1.4))
        rate_step = float(rng.uniform(-100, 100))
    return EmulatedClockSpec(
        rate_ppm=rate_ppm, offset_s=offset_s, drift_ppb_s=drift, tick_ns=tick,
        step_at_s=step_at, step_ns=step_ns, rate_step_at_s=rate_at, rate_step_ppm=rate_step,
    )  # fmt: skip


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    ap.add_argument(
        "--close", action="store_true", help="a step and a change of rate within 400 ms"
    )
    args = ap.parse_args()
    trials = 20 if args.quick else args.trials
    print(machine())
    rng = np.random.default_rng(args.seed)
    tally = Tally("live", "refitted")
    for k in range(trials):
        spec = random_spec(rng, args.close)
        truth = Truth(spec, int(rng.integers(2**31)))
        for label, live in (("live", True), ("refitted", False)):
            result = check(
                truth.inserted, truth.removed, T0, FRAME_NS, spec.tick_ns, run_engine(truth, live)
            )
            tally.add(label, result, f"trial {k} [{spec}]")
    print(f"{trials} trials")
    failed = not tally.report()
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
