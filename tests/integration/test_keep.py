"""``streamscope run --keep``: a run of a plain threaded program holds a bounded number of
frames, and every item the program put is still counted in them (the program's own count)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import streamscope as ss
from streamscope.analysis import findings
from streamscope.report import render_report
from watched import cli

PROGRAM = """
import json, queue, sys, threading, time

def produce(q, until, counted):
    n = 0
    while time.monotonic() < until:
        for _ in range(20):
            q.put(n)
            n += 1
        time.sleep(0.005)
    q.put(None)
    counted["put"] = n + 1  # the None too: an item through the queue

def consume(q, counted):
    got = 0
    while q.get() is not None:
        got += 1
    counted["got"] = got + 1

if __name__ == "__main__":
    q = queue.Queue(64)
    counted = {}
    until = time.monotonic() + float(sys.argv[1])
    threads = [threading.Thread(target=produce, args=(q, until, counted)),
               threading.Thread(target=consume, args=(q, counted))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    with open(sys.argv[2], "w") as f:
        json.dump(counted, f)
"""


def test_a_long_run_keeps_few_frames_and_every_item(tmp_path: Path) -> None:
    prog, out, truth = tmp_path / "feed.py", tmp_path / "feed.duckdb", tmp_path / "truth.json"
    prog.write_text(PROGRAM)
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--frame", "20ms", "--keep", "1s",
         "--quiet", "--", "12", str(truth)],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    counted = json.loads(truth.read_text())
    assert counted["put"] == counted["got"] > 1000, counted
    with ss.load(out) as run:
        per_target = run.sql("SELECT query_id, target, count(*) FROM frame GROUP BY 1, 2")[1]
        # 600 frames of 20 ms each unrolled; kept: 1 s of them (50), then 4 s of frames 16
        # times as long (13), then the rest in frames 256 times as long (2)
        assert per_target and all(n <= 100 for _, _, n in per_target), per_target
        (tq,) = [q.id for q in run.queries if q.metric == "throughput"]
        items = run.sql(
            "SELECT sum(s.value * f.covered_ns / 1e9) FROM stat s JOIN frame f "
            f"USING (query_id, target, frame) WHERE s.query_id = {tq} AND s.stat = 'mean'"
        )[1][0][0]
        assert abs(items - counted["put"]) < 0.5, (items, counted)
        stretches = run.rolled_up()
        assert stretches and stretches[0][0] == 0, stretches
        # the last stretch rolled up ends where the full-resolution frames begin, rolled as
        # the run's end left it: the last 1 s, and at most a rolled frame (16 x 20 ms) more,
        # where the coarser frames' edges fall
        assert run.duration_ns - max(b for _, b, _, _ in stretches) <= 1e9 + 16 * 20e6
        said = [f for f in findings(run) if f.kind == "rolled_up"]
        assert said and "--keep" in said[0].title
        assert "rolled up into coarser frames" in render_report(run)[0]  # the report says so
    shown = subprocess.run([*cli(), "show", str(out)], capture_output=True, text=True,
                           timeout=120, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "rolled up into coarser frames" in shown.stdout
