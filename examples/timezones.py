"""Latency into a process with a clock of its own, with the application's own truth.

src (host) -> work (a process, on an emulated clock the monitor is never told) -> sink. The
application stamps, on the host clock, when each item entered ``src -> work`` (the source
resumes right after the insertion) and when ``work`` took it (the first thing it does): the
application's latencies, saved as ``inserted.npy`` and ``removed.npy`` in the truth folder, to
set beside streamscope's cross-clock latencies and their uncertainty. Those stamps lie µs from
the taps on a quiet machine, and more where a busy one holds a thread back between the two; the
exact truth is what a validation run keeps (``--ground-truth``: every record, and the clock as it
really was), which the tests and ``benchmarks/bench_clock_trials.py`` hold the bounds to.

    streamscope run examples/timezones.py -q 'latency(src -> work): p50 every 100ms' \\
        -- --clock rate_ppm=37,offset_s=12.5,step_at_s=0.5,step_ns=300000 --truth /tmp/tz
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

import streamscope as ss

__all__ = ["Source", "Work", "build", "pipeline"]


class Source:
    def __init__(self, truth: Path, items: int, gap_s: float = 0.0003) -> None:
        self.truth, self.items, self.gap_s = truth, items, gap_s

    def generate(self):  # type: ignore[no-untyped-def]
        inserted = np.zeros(self.items, dtype=np.int64)
        for k in range(self.items):
            time.sleep(self.gap_s)
            yield k
            inserted[k] = time.monotonic_ns()  # resumed right after the insertion completed
        np.save(self.truth / "inserted.npy", inserted)


class Work:
    def __init__(self, truth: Path, work_s: float = 0.0004) -> None:
        self.truth, self.work_s = truth, work_s
        self.removed: list[int] = []

    def process(self, item: int) -> int:
        self.removed.append(time.monotonic_ns())  # the host clock: truth, not the device's
        time.sleep(self.work_s)
        return item

    def teardown(self) -> None:
        np.save(self.truth / "removed.npy", np.array(self.removed, dtype=np.int64))


def build(truth: Path, clock: str | None, items: int, name: str = "timezones") -> ss.Pipeline:
    """The pipeline; ``clock`` None: the middle process reads the host's clock."""
    p = ss.Pipeline(name)
    p.add("src", Source(truth, items))
    p.add("work", Work(truth), resource=ss.Process("dev", clock=clock))
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=8)
    return p


def pipeline(argv: list[str]) -> ss.Pipeline:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clock", default="rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5")
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--truth", type=Path, required=True)
    a = ap.parse_args(argv)
    a.truth.mkdir(parents=True, exist_ok=True)
    return build(a.truth, a.clock, a.items)
