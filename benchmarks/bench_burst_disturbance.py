"""How much periodic calibration bursts slow a running pipeline (target: < 1 % throughput).

The same pipeline (a source here, a CPU-bound stage on a process with its own emulated clock, a
sink here) runs with calibration only at the clock domain's start and end, and with short bursts
every 2 s and every 0.5 s, interleaved, several times. Printed: items/s per variant (median of the
repetitions) and the ratio to the start-and-end-only run. Run: python benchmarks/bench_burst_disturbance.py
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import streamscope as ss

CLOCK = "rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5"


def spin(x: int) -> int:
    """About 20 µs of arithmetic per item: CPU-bound, so any stolen time shows."""
    acc = x
    for i in range(300):
        acc = (acc * 31 + i) % 1_000_003
    return acc


def pipeline(items: int) -> ss.Pipeline:
    p = ss.Pipeline("disturbance")
    p.add("src", range(items))
    p.add("work", spin, resource=ss.Process("dev", clock=CLOCK))
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=64)
    return p


def rate(items: int, every_s: float) -> float:
    opts = ss.RunOptions(frame_ns=500_000_000, mode="inline", calibrate_every_s=every_s)
    t0 = time.perf_counter()
    res = ss.run(pipeline(items), ["throughput(work -> sink): mean every 500ms"], opts)
    elapsed = time.perf_counter() - t0
    if res.status != "completed":
        raise SystemExit(f"run {res.status}: {res.error}")
    return items / elapsed


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer items and repetitions")
    ap.add_argument("--reps", type=int, default=None, help="interleaved repetitions")
    ap.add_argument("--items", type=int, default=None, help="items per run")
    a = ap.parse_args()
    items, reps = (20_000, 2) if a.quick else (150_000, 5)
    items, reps = a.items or items, a.reps or reps
    variants = {"start and end only": 0.0, "every 2 s": 2.0, "every 0.5 s": 0.5}
    got: dict[str, list[float]] = {k: [] for k in variants}
    for r in range(reps):
        order = list(variants) if r % 2 == 0 else list(variants)[::-1]
        for k in order:
            got[k].append(rate(items, variants[k]))
    base = statistics.median(got["start and end only"])
    print(
        f"{items:,} items per run, {reps} interleaved repetitions; CPU-bound stage on an emulated-clock process"
    )
    print(f"{'calibration':22s} {'items/s':>10s} {'spread':>8s} {'vs start/end':>13s}")
    for k, v in got.items():
        m = statistics.median(v)
        spread = (max(v) - min(v)) / 2 / m * 100
        print(f"{k:22s} {m:10,.0f} {spread:7.1f}% {m / base:12.3f}x")
    worst = min(statistics.median(v) for v in got.values()) / base
    print(
        f"throughput lost to periodic bursts (worst variant): {(1 - worst) * 100:.2f}% (target < 1%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
