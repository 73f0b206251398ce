"""Programs as people write them, plain and under ``streamscope run``, side by side.

Each program of ``examples/programs`` (a shared worker function, pypeln's three kinds, an
executor, chained ``Pool.imap``, mpire, a DataLoader-shaped loader, the asyncio docs' workers,
named processes, a fan-in, ``JoinableQueue`` workers, ``apply_async`` with callbacks,
``ProcessPoolExecutor.map`` and a bounded window of its futures, joblib, ``PriorityQueue`` and
``SimpleQueue``, an ``asyncio.TaskGroup``, a chunked ETL on a thread pool, an asyncio TCP
service, a synchronous and an asynchronous streamz stream) runs plainly and monitored,
alternately, ``--reps`` times; the table gives the median wall time of the whole process and
of the program's own work window (from its first item's work to its last, by its own stamps)
and their ratios. The target: monitored <= 1.05x on the
work window. The whole process adds the monitor's start and the run file's end.

    python benchmarks/bench_programs.py [--quick] [--reps N] [--only NAME...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROGRAMS = Path(__file__).resolve().parents[1] / "examples" / "programs"
sys.path.insert(0, str(PROGRAMS))
from _stamps import truth  # noqa: E402

#: The programs and their arguments (items) for a full run and a quick one.
CORPUS = {
    "shared_worker": ("1000", "150"),
    "generic_stage": ("800", "120"),
    "pypeln_thread": ("1000", "150"),
    "pypeln_process": ("200", "40"),
    "pypeln_task": ("800", "120"),
    "executor_queue": ("1000", "150"),
    "pool_imap": ("800", "120"),
    "mpire_map": ("800", "120"),
    "dataloader": ("800", "120"),
    "asyncio_workers": ("1200", "200"),
    "process_workers": ("240", "36"),
    "fan_in": ("1200", "200"),
    "joinable_workers": ("400", "60"),
    "apply_callbacks": ("400", "60"),
    "executor_map": ("400", "60"),
    "joblib_parallel": ("200", "40"),
    "priority_queue": ("1000", "150"),
    "task_group": ("1200", "200"),
    "etl_chunks": ("400", "60"),
    "futures_window": ("400", "60"),
    "tcp_service": ("1200", "200"),
    "stream_nodes": ("600", "100"),
    "stream_sync": ("400", "60"),
}
#: What a quick run (the suite's smoke check) keeps: one program, its threads and queues.
QUICK = ("shared_worker",)
TARGET = 1.05
CLI = [sys.executable, "-c", "import sys; from streamscope.cli import main; sys.exit(main())"]


def once(name: str, items: str, monitored: bool) -> tuple[float, float]:
    """One run: (whole process, work window) in seconds."""
    with tempfile.TemporaryDirectory(prefix="bench-programs-") as tmp:
        stamps = Path(tmp, "stamps")
        stamps.mkdir()
        prog = str(PROGRAMS / f"{name}.py")
        cmd = [sys.executable, prog, items]
        if monitored:
            out = str(Path(tmp, "run.duckdb"))
            cmd = [*CLI, "run", prog, "-o", out, "--quiet", "--", items]
        env = {**os.environ, "PROGRAM_STAMPS": str(stamps)}
        t = time.perf_counter()
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, cwd=tmp, timeout=300, check=False,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        whole = time.perf_counter() - t
        if proc.returncode != 0:
            raise SystemExit(f"{name} ({'monitored' if monitored else 'plain'}) failed:\n"
                             f"{proc.stderr[-2000:]}")  # fmt: skip
        lo, hi = truth(stamps)["window"]
        return whole, (hi - lo) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="one program, fewer items, once")
    parser.add_argument("--reps", type=int, default=None, help="alternate runs of each (3)")
    parser.add_argument("--only", nargs="*", default=None, help="these programs only")
    args = parser.parse_args()
    reps = args.reps or (1 if args.quick else 3)
    names = args.only or (QUICK if args.quick else tuple(CORPUS))
    print(f"{'program':<16} {'plain s':>8} {'monitored s':>12} {'ratio':>7}   "
          f"{'work plain s':>12} {'work mon. s':>12} {'ratio':>7}")  # fmt: skip
    worst = 0.0
    for name in names:
        items = CORPUS[name][1 if args.quick else 0]
        plain: list[tuple[float, float]] = []
        mon: list[tuple[float, float]] = []
        for r in range(reps):
            order = (False, True) if r % 2 == 0 else (True, False)
            for monitored in order:
                (mon if monitored else plain).append(once(name, items, monitored))
        p_whole, m_whole = (statistics.median(w for w, _ in x) for x in (plain, mon))
        p_work, m_work = (statistics.median(w for _, w in x) for x in (plain, mon))
        worst = max(worst, m_work / p_work)
        print(f"{name:<16} {p_whole:>8.2f} {m_whole:>12.2f} {m_whole / p_whole:>6.2f}x   "
              f"{p_work:>12.3f} {m_work:>12.3f} {m_work / p_work:>6.3f}x")  # fmt: skip
    verdict = "meets" if worst <= TARGET else "misses"
    print(f"work window, monitored / plain, at most {worst:.3f}x: {verdict} the target "
          f"<= {TARGET}x")  # fmt: skip


if __name__ == "__main__":
    main()
