"""What a run says its monitoring cost, against what it did cost (target: within ±30 % of the
paired measurement, or ±1 percentage point when that is below 3 %).

In: nothing (``_workload.py``'s three stages, each spinning pure-Python work sized for a given
number of probe events per second per stage). Out: per event rate, the same pipeline run by the
bare runner (no monitoring at all) and by ``streamscope.run`` with every channel and stage
monitored, interleaved; the paired slowdown of the stage threads' own CPU (what the probes in
those threads cost them, and nothing another process did), the share of the run the run file
reports as probe time, and the difference. The monitor process's CPU is printed beside them:
it runs on another core, and the run file reports it on its own line.

    python benchmarks/bench_overhead.py [--quick] [--reps N]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import streamscope as ss
from _harness import interleave, machine, paired_ratios, parser, table
from _workload import EVERY_CHANNEL_AND_STAGE, Window, Work, pipeline, size_light
from streamscope.pipeline.runner import Runner

#: Probe events per second and stage.
RATES = (1_000, 10_000, 100_000)


def verdict(reported: float, measured: float) -> str:
    """Within ±30 % of the measurement, or ±1 point where it is below 3 %."""
    if abs(measured) < 3.0:
        return "meets" if abs(reported - measured) <= 1.0 else "misses"
    return "meets" if abs(reported - measured) <= 0.3 * abs(measured) else "misses"


@dataclass(frozen=True, slots=True)
class Figures:
    measured: list[float]  # % per round: stage CPU, monitored vs bare runner
    reported: list[float]  # % per monitored run: probe time over the run's duration
    wall: float  # % median paired wall slowdown
    monitor: float  # the monitor process's CPU-s per s of run
    events: int  # probe events per monitored run


def measure(work: Work, n: int, reps: int, tmp: Path) -> Figures:
    reported: list[float] = []
    monitor: list[float] = []
    events: list[int] = []

    def runner() -> tuple[float, ...]:
        win = Window()
        r = Runner(pipeline(work, n, win), (), None, None)
        r.start()
        if r.wait().status != "completed":
            raise RuntimeError("the bare runner did not complete")
        return win.per_item()

    def monitored() -> tuple[float, ...]:
        win = Window()
        out = tmp / f"run-{time.monotonic_ns()}.duckdb"
        res = ss.run(pipeline(work, n, win), EVERY_CHANNEL_AND_STAGE, ss.RunOptions(out=out))
        if res.status != "completed":
            raise RuntimeError(f"monitored run {res.status}: {res.error}")
        figures = win.per_item()
        with ss.load(out) as run:
            dur = run.duration_ns or 1
            rows = run.overhead()
            reported.append(100 * sum(r["est_probe_ns"] for r in rows) / dur)
            events.append(sum(r["events"] for r in rows))
            cpu = run.sql("SELECT coalesce(sum(cpu_ns), 0) FROM monitor")[1][0][0]
            monitor.append(cpu / dur)
        out.unlink()
        return figures

    wall, _, stage = interleave([("runner", runner), ("monitored", monitored)], reps, metrics=3)
    ratio = paired_ratios(stage[1], stage[0])
    wall_ratio = paired_ratios(wall[1], wall[0])
    return Figures(
        [100 * (r - 1) for r in ratio.samples],
        reported,
        100 * (wall_ratio.median - 1),
        statistics.median(monitor),
        round(statistics.median(events)),
    )


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    args = ap.parse_args()
    quick = args.quick
    reps = args.reps or (2 if quick else 9)
    print(machine())
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
        for rate in RATES[:2] if quick else RATES:
            # About two probe events per item and stage (a put or a get, a state change);
            # the three stages share one interpreter lock.
            items_s = rate / 2
            work = size_light(1e6 / (3 * items_s))
            n = max(300, round(items_s * (0.5 if quick else 4.0)))
            f = measure(work, n, reps, Path(tmp))
            m, r = statistics.median(f.measured), statistics.median(f.reported)
            rows.append(
                [f"{rate:,}", f"{f.events:,}", f"{m:+.2f} %",
                 f"{min(f.measured):+.2f}..{max(f.measured):+.2f}", f"{f.wall:+.2f} %",
                 f"{r:.2f} %", f"{r - m:+.2f}", f"{f.monitor:.3f}", verdict(r, m)]
            )  # fmt: skip
    print(
        table(
            ["events/s/stage", "events/run", "measured", "rounds", "wall", "reported",
             "difference", "monitor CPU-s/s", "target"],
            rows,
        )
    )  # fmt: skip
    print(
        "measured: paired slowdown of the stage threads' own CPU, monitored vs the bare runner; "
        "reported: the run file's probe time over the run's duration"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
