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
