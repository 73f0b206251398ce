"""What the command line costs a user before any figure: a program of one ``print`` run plainly
and under ``streamscope run``, ``streamscope show`` of its run, ``streamscope --version``.

Each command in a fresh process, interleaved repetitions; per command its wall time and the CPU
time of it and every process it started (``RUSAGE_CHILDREN``), and what ``streamscope run``
adds to ``python hello.py``. The targets (a quiet 2-core machine): ``run`` adds <= 0.3 s of
wall and <= 0.5 s of CPU, ``show`` <= 0.25 s, ``--version`` <= 0.1 s.

    python benchmarks/bench_start.py [--quick] [--reps N]
"""

from __future__ import annotations

import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _harness import interleave, machine, parse_args, table

TARGETS = {"run adds (wall)": 0.3, "run adds (CPU)": 0.5, "show": 0.25, "--version": 0.1}


def timed(cmd: list[str], cwd: Path) -> Callable[[], tuple[float, float]]:
    """A measure of ``cmd``: (wall s, CPU s of it and its children)."""

    def run() -> tuple[float, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False,
                              stdin=subprocess.DEVNULL)  # fmt: skip
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {proc.stderr[-1500:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return wall, cpu

    return run


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (2 if args.quick else 9)
    print(machine())
    cli = str(Path(sys.executable).with_name("streamscope"))
    with tempfile.TemporaryDirectory(prefix="bench-start-") as tmp:
        d = Path(tmp)
        (d / "hello.py").write_text('print("hello")\n')
        run = [cli, "run", "hello.py", "-o", "hello.duckdb", "--overwrite", "--quiet"]
        subprocess.run(run, cwd=d, capture_output=True, check=True)  # the run show reads
        variants = [
            ("python hello.py", timed([sys.executable, "hello.py"], d)),
            ("streamscope run hello.py", timed(run, d)),
            ("streamscope show RUN", timed([cli, "show", "hello.duckdb"], d)),
            ("streamscope --version", timed([cli, "--version"], d)),
        ]
        walls, cpus = interleave(variants, reps, metrics=2)
    rows = [[w.name, f"{w.median:.3f}", f"{w.best:.3f}..{max(w.samples):.3f}", f"{c.median:.3f}"]
            for w, c in zip(walls, cpus, strict=True)]  # fmt: skip
    print(f"\nseconds per command, {reps} repetitions")
    print(table(["command", "wall s", "range", "CPU s"], rows))
    plain_w, run_w, show_w, version_w = (w.median for w in walls)
    plain_c, run_c = cpus[0].median, cpus[1].median
    got = {
        "run adds (wall)": run_w - plain_w,
        "run adds (CPU)": run_c - plain_c,
        "show": show_w,
        "--version": version_w,
    }
    print(f"streamscope run is {run_w / plain_w:.1f}x python hello.py's wall time")
    for name, figure in got.items():
        verdict = "meets" if figure <= TARGETS[name] else "misses"
        print(f"  {name}: {figure:.3f} s ({verdict} the target <= {TARGETS[name]} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
