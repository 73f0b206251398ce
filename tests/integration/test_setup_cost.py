"""What watching a program's many threads and queues costs is in the run's overhead: measured
around the work of making each thread a stage's worker and each queue a channel, counted, and
no more than the CPU time the program's process spent in all (its own clock)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import streamscope as ss
from streamscope.store.run import SETUP
from watched import cli

PROGRAM = """
import json, queue, sys, threading, time

def add(q, out, k):
    total = 0
    while (item := q.get()) is not None:
        total += item
    out[k] = total

n = int(sys.argv[1])
queues = [queue.Queue(8) for _ in range(n)]
out = [0] * n
threads = [threading.Thread(target=add, args=(q, out, k)) for k, q in enumerate(queues)]
for t in threads:
    t.start()
for i in range(20):
    for q in queues:
        q.put(i)
for q in queues:
    q.put(None)
for t in threads:
    t.join()
assert out == [190] * n
with open(sys.argv[2], "w") as f:
    json.dump({"cpu_ns": time.process_time_ns()}, f)
"""


def test_a_programs_threads_and_queues_are_counted_in_what_monitoring_cost(
    tmp_path: Path,
) -> None:
    prog, truth, out = tmp_path / "many.py", tmp_path / "truth.json", tmp_path / "run.duckdb"
    prog.write_text(PROGRAM)
    ran = subprocess.run([*cli(), "run", str(prog), "-o", str(out), "--", "40", str(truth)],
                         capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    cpu_ns = json.loads(truth.read_text())["cpu_ns"]
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
