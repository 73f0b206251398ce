"""What watching a program's many threads and queues costs is in the run's overhead: measured
around the work of making each thread a stage's worker and each queue a channel, counted, and
no more than the CPU time the program's process spent in all (its own clock)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_start import _bench_program

import streamscope as ss
from streamscope.store.run import SETUP
from watched import cli

#: Appended to the benchmark's program (inside its ``__main__`` block): its process's CPU time.
CPU_TOO = """
    with open(window + ".cpu", "w") as f:
        f.write(str(time.process_time_ns()))
"""


def test_a_programs_threads_and_queues_are_counted_in_what_monitoring_cost(
    tmp_path: Path,
) -> None:
    """``benchmarks/bench_threads.py``'s program (40 threads, a queue each), which also writes
    the CPU time its process ran in all."""
    prog, out = tmp_path / "many.py", tmp_path / "run.duckdb"
    prog.write_text(_bench_program() + CPU_TOO)
    ran = subprocess.run([*cli(), "run", str(prog), "-o", str(out), "--", "40", str(tmp_path / "window")],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    cpu_ns = int((tmp_path / "window.cpu").read_text())
    with ss.load(out) as run:
        _, rows = run.sql("SELECT setup_ns, threads, queues FROM machine WHERE host = 'main'")
        ((setup_ns, threads, queues),) = rows
        (row,) = [r for r in run.overhead() if r["stage"] == SETUP]
    # 40 workers and the main thread dealing to them; 40 queues, each a channel
    assert (threads, queues) == (41, 40)
    # measured by its threads' own clocks: within what its process ran in all
    assert 0 < setup_ns < cpu_ns
    assert row["cost_ns"] == setup_ns and row["fraction"] > 0
    said = ran.stderr[ran.stderr.index("monitoring overhead") :]
    assert "making its threads workers and its queues channels" in " ".join(said.split())


def test_a_programs_watched_start_is_counted_within_what_its_process_ran_before_it(
    tmp_path: Path,
) -> None:
    """A program of no thread and no queue writes its process's CPU time at its first line:
    the run's setup is its process loading streamscope, more than nothing and less than that
    (which also holds the interpreter's own start, as plainly)."""
    prog, out, first = tmp_path / "first.py", tmp_path / "run.duckdb", tmp_path / "first"
    prog.write_text(
        "import sys, time\n"
        "open(sys.argv[1], 'w').write(str(time.process_time_ns()))\n"
        "print('hello')\n"
    )
    ran = subprocess.run([*cli(), "run", str(prog), "-o", str(out), "--", str(first)],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0 and ran.stdout == "hello\n", ran.stderr[-2000:]
    before = int(first.read_text())
    with ss.load(out) as run:
        _, rows = run.sql("SELECT setup_ns, threads, queues FROM machine WHERE host = 'main'")
        ((setup_ns, threads, queues),) = rows
        (row,) = [r for r in run.overhead() if r["stage"] == SETUP]
    assert (threads, queues) == (0, 0)
    assert 0 < setup_ns < before
    assert row["cost_ns"] == setup_ns
    said = " ".join(ran.stderr[ran.stderr.index("monitoring overhead") :].split())
    assert "loading streamscope and making its threads workers" in said
