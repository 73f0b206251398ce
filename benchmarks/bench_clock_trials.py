"""Randomised clock trials through real process boundaries, against each clock's exact truth.

In: nothing (a three-stage pipeline whose middle stage runs in a process with an emulated clock
the monitor is never told: a random rate, offset, drift and tick, and at a random time a step
forward or back of 1 µs to 10 ms, a change of rate of up to ±100 ppm, or both). Records,
calibration round trips and the monitor are all real: separate processes, shared-memory rings,
the real scheduler. The run is a validation run, so its file also holds each emulated clock as
it really was (``clock_truth``, read by nothing that estimates): every removal record's device
tick is mapped through that clock's exact inverse to when it really happened on the host's clock
(for a reading shortly after a backward step, whose tick the clock showed twice: to the interval
between the two times). Out: per trial, every frame's monitored median, minimum and maximum
latency against the exact truth, live and after ``streamscope retime``; whether the truth lay
inside the uncertainty the frame reports (one device tick of quantisation allowed), and any
negative latency. Target: the truth inside in 100 % of the frames, no negative latency anywhere.

    python benchmarks/bench_clock_trials.py [--quick] [--trials N] [--seed S] [--strict]

It exits 0 whatever the figures (a benchmark); with ``--strict`` (the test suite's use) it
exits 1 when a target is missed, since this one is a property that must hold, not a timing.
"""

from __future__ import annotations

import math
import sys
import tempfile
from pathlib import Path

import numpy as np

import streamscope as ss
from _clocktruth import Tally, judge
from _harness import machine, parser

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
from streamscope.monitor.retime import retime
from timezones import build

ITEMS = 1200
FRAME_NS = 100_000_000
CALIBRATE_EVERY_S = 0.2
QUERY = "latency(src -> work): p50, min, max every 100ms"
CHANNEL = "src -> work"


def run_once(tmp: Path, clock: str) -> Path:
    tmp.mkdir(parents=True)
    p = build(tmp, clock, ITEMS, name="clock-trial")
    out = tmp / "run.duckdb"
    res = ss.run(
        p,
        [QUERY],
        ss.RunOptions(
            frame_ns=FRAME_NS, out=out, mode="inline", calibrate_every_s=CALIBRATE_EVERY_S,
            ground_truth=True,
        ),
    )  # fmt: skip
    if res.status != "completed":
        raise RuntimeError(f"trial run {res.status}: {res.error}")
    return out


def random_clock(rng: np.random.Generator) -> str:
    """Rate ±100 ppm, offset ±1000 s, drift ±10 ppb/s, tick 1 ns – 2 µs; then a step (forward
    or back, 1 µs – 10 ms, log-uniform), a change of rate (±100 ppm), or both, at a random
    time."""
    parts = [
        f"rate_ppm={rng.uniform(-100, 100):.3f}",
        f"offset_s={rng.uniform(-1000, 1000):.6f}",
        f"drift_ppb_s={rng.uniform(-10, 10):.3f}",
        f"tick_ns={math.exp(rng.uniform(0, math.log(2000))):.4f}",
    ]
    what = rng.integers(3)
    if what in (0, 2):
        sign = rng.choice([-1.0, 1.0])
        parts.append(f"step_at_s={rng.uniform(0.2, 0.9):.4f}")
        parts.append(f"step_ns={sign * math.exp(rng.uniform(math.log(1e3), math.log(1e7))):.1f}")
    if what in (1, 2):
        parts.append(f"rate_step_at_s={rng.uniform(0.2, 0.9):.4f}")
        parts.append(f"rate_step_ppm={rng.uniform(-100, 100):.3f}")
    return ",".join(parts)


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = ap.parse_args()
    trials = 3 if args.quick else args.trials
    print(machine())
    rng = np.random.default_rng(args.seed)
    tally = Tally("live", "retimed")
    with tempfile.TemporaryDirectory(prefix="trial-clocks-") as tmp_s:
        for k in range(trials):
            clock = random_clock(rng)
            d = Path(tmp_s) / f"t{k}"
            out = run_once(d, clock)
            for label in ("live", "retimed"):
                if label == "retimed":
                    retime(out)
                tally.add(label, judge(out, CHANNEL, FRAME_NS), f"trial {k} [{clock}]")
            for p in d.iterdir():
                p.unlink()
            d.rmdir()
    print(f"{trials} trials")
    failed = not tally.report()
    return 1 if args.strict and failed else 0


if __name__ == "__main__":
    sys.exit(main())
