"""What sampling stacks costs: programs as people write them under ``streamscope run``, with
stack sampling (the default, about 100 samples a second per worker) and with ``--no-stacks``,
side by side.

Each program of ``examples/programs`` runs both ways, alternately, ``--reps`` times; the table
gives the median of the program's own work window (from its first item's work to its last, by
its own stamps) with stacks over without, the monitor process's CPU time per second of run both
ways (what reducing the samples adds), and the samplers' own threads' CPU per second of run and
samples taken (the ``stack_sampler`` table). The target: the work window with stacks <= 1.01x
without.

    python benchmarks/bench_stacks.py [--quick] [--reps N] [--only NAME...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb

PROGRAMS = Path(__file__).resolve().parents[1] / "examples" / "programs"
sys.path.insert(0, str(PROGRAMS))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _stamps import truth  # noqa: E402

from bench_programs import CORPUS  # noqa: E402

QUICK = ("shared_worker",)
TARGET = 1.01
CLI = [sys.executable, "-c", "import sys; from streamscope.cli import main; sys.exit(main())"]


def once(name: str, items: str, stacks: bool) -> tuple[float, float, float, float, int]:
    """One monitored run: (work window s, run s, monitor CPU s, samplers' CPU s, samples)."""
    with tempfile.TemporaryDirectory(prefix="bench-stacks-") as tmp:
        stamps = Path(tmp, "stamps")
        stamps.mkdir()
        out = Path(tmp, "run.duckdb")
        cmd = [*CLI, "run", str(PROGRAMS / f"{name}.py"), "-o", str(out), "--quiet",
               *(() if stacks else ("--no-stacks",)), "--", items]  # fmt: skip
        env = {**os.environ, "PROGRAM_STAMPS": str(stamps)}
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=300, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        if proc.returncode != 0:
            raise SystemExit(f"{name} ({'stacks' if stacks else 'no stacks'}) failed:\n"
                             f"{proc.stderr[-2000:]}")  # fmt: skip
        lo, hi = truth(stamps)["window"]
        con = duckdb.connect(str(out), read_only=True)
        try:
            (duration,) = con.execute("SELECT duration_ns FROM run").fetchone() or (0,)
            (monitor,) = con.execute("SELECT coalesce(sum(cpu_ns), 0) FROM monitor").fetchone() or (
                0,
            )
            cpu, n = con.execute(
                "SELECT coalesce(sum(cpu_ns), 0), coalesce(sum(samples), 0) FROM stack_sampler"
            ).fetchone() or (0, 0)
        finally:
            con.close()
        return (hi - lo) / 1e9, int(duration) / 1e9, int(monitor) / 1e9, int(cpu) / 1e9, int(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one program, fewer items, once")
    parser.add_argument("--reps", type=int, default=None, help="alternate runs of each (5)")
    parser.add_argument("--only", nargs="*", default=None, help="these programs only")
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 5)
    names = args.only or (QUICK if args.quick else tuple(CORPUS))
    print(f"{'program':<16} {'work off s':>10} {'work on s':>10} {'ratio':>7}   "
          f"{'monitor CPU/s off':>17} {'on':>6}   {'samplers CPU/s':>14} {'samples/s':>9}")  # fmt: skip
    ratios = []
    for name in names:
        items = CORPUS[name][1 if args.quick else 0]
        runs: dict[bool, list[tuple[float, float, float, float, int]]] = {False: [], True: []}
        for r in range(reps):
            for stacks in (False, True) if r % 2 == 0 else (True, False):
                runs[stacks].append(once(name, items, stacks))
        work = {k: statistics.median(x[0] for x in v) for k, v in runs.items()}
        mon = {k: statistics.median(x[2] / x[1] for x in v if x[1]) for k, v in runs.items()}
        sampler = statistics.median(x[3] / x[1] for x in runs[True] if x[1])
        rate = statistics.median(x[4] / x[1] for x in runs[True] if x[1])
        ratio = work[True] / work[False]
        ratios.append(ratio)
        print(f"{name:<16} {work[False]:>10.3f} {work[True]:>10.3f} {ratio:>6.3f}x   "
              f"{mon[False] * 100:>16.2f}% {mon[True] * 100:>5.2f}%   "
              f"{sampler * 100:>13.3f}% {rate:>9.0f}")  # fmt: skip
    mid = statistics.median(ratios)
    verdict = "meets" if mid <= TARGET else "misses"
    print(f"work window with stacks / without: median {mid:.3f}x over {len(ratios)} programs, "
          f"at most {max(ratios):.3f}x: the median {verdict} the target <= {TARGET}x")  # fmt: skip


if __name__ == "__main__":
    main()
