"""Latency into a process with a clock of its own, with the application's own truth.

src (host) -> work (a process, on an emulated clock the monitor is never told) -> sink. The
application stamps, on the host clock, when each item entered ``src -> work`` (the source
resumes right after the insertion) and when ``work`` took it (the first thing it does): the
true latencies, saved as ``inserted.npy`` and ``removed.npy`` in the truth folder, against which
streamscope's cross-clock latencies and their uncertainty are checked.

    streamscope run examples/timezones.py -q 'latency(src -> work): p50 every 100ms' \\
        -- --clock rate_ppm=37,offset_s=12.5,step_at_s=0.5,step_ns=300000 --truth /tmp/tz
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import streamscope as ss
from streamscope.aggregate.points import QuantilesPoint, ScalarPoint

__all__ = ["FrameCheck", "Source", "Work", "build", "frames", "pipeline"]


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


@dataclass(frozen=True, slots=True)
class FrameCheck:
    frame: int
    error_ns: float  # monitored median - true median
    uncertainty_ns: float
    lowest_ns: float  # the frame's smallest latency (min, or else first)
    violations: float = 0.0


def frames(out: Path, truth: Path, frame_ns: int, query_id: int = 0) -> list[FrameCheck]:
    """Every frame of the latency query ``query_id`` (with a median: ``p50`` or ``box``) against
    the truth in ``truth``. Frames with 20 items or more, after the first, before the source's
    last item and holding no calibration burst are checked; the others get an infinite
    uncertainty (not counted)."""
    inserted = np.load(truth / "inserted.npy")
    removed = np.load(truth / "removed.npy")
    rows = []
    with ss.load(out) as run:
        frame_of = (removed - run.meta.t0_host_ns) // frame_ns
        bursts = _bursts(run)
        for fr in run.results(query_id, "src -> work"):
            sel = frame_of == fr.frame
            stats = {p.stat: p.value for p in fr.points if isinstance(p, ScalarPoint)}
            # The first frame (the device process's first calls) and frames that reach past the
            # source's last item (the end burst and the teardown in the device process, while
            # the last items drain) hold the application's own stamps back by tens of µs, on
            # any clock: only the frames between are held against the truth.
            warm_up = fr.frame == 0 or fr.t_end_ns > int(inserted[-1]) - run.meta.t0_host_ns
            # A calibration burst's round trips hold the device process's own stamps back too
            # (they share its interpreter lock with the stage): frames that hold one are left out.
            warm_up |= any(lo < fr.t_end_ns and hi > fr.t_start_ns for lo, hi in bursts)
            for p in fr.points:
                if isinstance(p, QuantilesPoint):
                    stats.update(
                        {f"p{round(q * 100)}": v for q, v in zip(p.qs, p.values, strict=True)}
                    )
            low = float(stats.get("min", stats.get("first")) or 0.0)
            viol = float(stats.get("violations") or 0.0)
            if sel.sum() < 20 or warm_up:
                rows.append(FrameCheck(fr.frame, 0.0, math.inf, low, viol))
                continue
            # Medians: one item held up at the device process's start (first calls, imports)
            # moves a mean by tens of µs, in either clock; a median not at all.
            # (the monitor's quantiles invert the distribution: the smallest value whose
            # cumulative count reaches half; so does this)
            true = np.sort((removed - inserted)[sel])[math.ceil(0.5 * int(sel.sum())) - 1]
            err = float(stats["p50"] or 0.0) - float(true)
            unc = float(stats.get("uncertainty_ns") or 0.0)
            rows.append(FrameCheck(fr.frame, err, unc, low, viol))
    return rows


def _bursts(run: ss.Run) -> list[tuple[int, int]]:
    """Each calibration burst's span in virtual ns (its first request to its last reply)."""
    cal = run.table("calibration")
    if not len(cal.get("burst", ())):
        return []
    t0 = run.meta.t0_host_ns
    out = []
    for b in sorted(set(np.asarray(cal["burst"]).tolist())):
        sel = np.asarray(cal["burst"]) == b
        out.append((int(np.min(cal["t1_ns"][sel])) - t0, int(np.max(cal["t3_ns"][sel])) - t0))
    return out


def pipeline(argv: list[str]) -> ss.Pipeline:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clock", default="rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5")
    ap.add_argument("--items", type=int, default=1500)
    ap.add_argument("--truth", type=Path, required=True)
    a = ap.parse_args(argv)
    a.truth.mkdir(parents=True, exist_ok=True)
    return build(a.truth, a.clock, a.items)
