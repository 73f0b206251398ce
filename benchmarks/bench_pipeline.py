"""A realistic three-stage pipeline monitored on every channel and stage, against the same stages
as hand-written threads with ``queue.Queue`` (targets: <= 1.03x wall at ~6 k items/s, <= 1.15x at
~100 k items/s).

In: nothing (``_workload.py``: parse (pure Python) -> transform (numpy) -> summarise (pure
Python), their work in the proportions 40 : 115 : 60 and sized at start-up so that the
hand-written threads run ~6 k items/s; the fast variant's stages spin about 2 µs each).
Out: per variant, µs per item (wall and CPU) from the first item to the last, interleaved
repetitions, and the ratios to the hand-written threads; for the monitored runs, what
the run file says monitoring cost, next to what the same runs cost against the bare runner.

    python benchmarks/bench_pipeline.py [--quick] [--reps N] [--rate slow|fast|both]
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import streamscope as ss
from _harness import fmt_spread, interleave, machine, paired_ratios, parser, table
from _workload import (
    EVERY_CHANNEL_AND_STAGE,
    Window,
    Work,
    hand_written,
    pipeline,
    size_for_rate,
    size_light,
)
from streamscope.pipeline.run.runner import Runner

TARGETS = {"slow": 1.03, "fast": 1.15}


class Variants:
    """The three ways to run one workload; each returns (wall, CPU, stage CPU) µs per item."""

    def __init__(self, work: Work, n: int, tmp: Path) -> None:
        self.work, self.n, self.tmp = work, n, tmp
        self.reported: list[float] = []  # probe share of the run, as the run file says
        self.monitor_cpu: list[float] = []  # the monitor process's CPU, per second of run
        self.drops: list[int] = []

    def threads(self) -> tuple[float, ...]:
        return hand_written(self.work, self.n).per_item()

    def runner(self) -> tuple[float, ...]:
        win = Window()
        r = Runner(pipeline(self.work, self.n, win), (), None, None)
        r.start()
        outcome = r.wait()
        if outcome.status != "completed":
            raise RuntimeError(f"bare runner: {outcome}")
        return win.per_item()

    def monitored(self) -> tuple[float, ...]:
        win = Window()
        out = self.tmp / f"run-{time.monotonic_ns()}.duckdb"
        res = ss.run(
            pipeline(self.work, self.n, win), EVERY_CHANNEL_AND_STAGE, ss.RunOptions(out=out)
        )
        if res.status != "completed":
            raise RuntimeError(f"monitored run {res.status}: {res.error}")
        figures = win.per_item()
        with ss.load(out) as run:
            dur = run.duration_ns or 1
            self.reported.append(sum(r["est_probe_ns"] for r in run.overhead()) / dur)
            cpu = run.sql("SELECT coalesce(sum(cpu_ns), 0) FROM monitor")[1][0][0]
            self.monitor_cpu.append(cpu / dur)
            self.drops.append(sum(d.dropped for d in run.drops()))
        out.unlink()
        return figures


def measure(label: str, work: Work, n: int, reps: int, target: float) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-pipeline-") as tmp:
        v = Variants(work, n, Path(tmp))
        wall, cpu, stage = interleave(
            [
                ("threads + queue.Queue", v.threads),
                ("Runner, unmonitored", v.runner),
                ("ss.run, every channel and stage", v.monitored),
            ],
            reps,
            metrics=3,
        )
    rate = 1e6 / wall[0].median
    print(f"\n{label}: {n:,} items per run, ~{rate:,.0f} items/s hand-written; {reps} rounds")
    rows = []
    for metric, results in (("wall", wall), ("CPU", cpu), ("stage CPU", stage)):
        for s in results:
            r = paired_ratios(s, results[0])
            rows.append(
                [s.name, metric, f"{s.median:,.2f}", fmt_spread(s), f"{r.median:.3f}x",
                 f"{r.best:.3f}..{max(r.samples):.3f}"]
            )  # fmt: skip
    print(table(["variant", "clock", "µs/item", "spread", "vs threads", "range"], rows))
    mon = paired_ratios(wall[2], wall[0])
    verdict = "meets" if mon.median <= target else "misses"
    print(
        f"monitored vs hand-written threads: {mon.median:.3f}x wall ({verdict} the target "
        f"<= {target}x)"
    )
    vs_runner = paired_ratios(stage[2], stage[1])
    measured = 100 * (vs_runner.median - 1)
    reported = 100 * statistics.median(v.reported)
    print(
        f"monitoring's cost, measured (stage CPU, monitored vs bare runner): {measured:+.2f} % "
        f"(rounds {100 * (vs_runner.best - 1):+.2f}..{100 * (max(vs_runner.samples) - 1):+.2f}); "
        f"reported by the runs: {reported:.2f} %; difference {reported - measured:+.2f} points"
    )
    print(
        f"monitor process: {statistics.median(v.monitor_cpu):.2f} CPU-s per s of run (another "
        f"core); records refused: {max(v.drops):,} at most per run"
    )


def main() -> int:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--rate", choices=("slow", "fast", "both"), default="both")
    args = ap.parse_args()
    quick = args.quick
    reps = args.reps or (2 if quick else 9)
    print(machine())
    if args.rate in ("slow", "both"):
        work = size_for_rate(6000, rounds=1 if quick else 6)
        print(
            f"sized for ~6 k items/s: {work.fields} fields, {work.fft}-point FFT, spin({work.spin})"
        )
        measure("realistic (~6 k items/s)", work, 1500 if quick else 12_000, reps, TARGETS["slow"])
    if args.rate in ("fast", "both"):
        light = size_light(2.0)
        measure(
            "fast (~2 µs per stage)", light, 20_000 if quick else 200_000, reps, TARGETS["fast"]
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
