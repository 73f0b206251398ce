"""Unmodified programs under ``streamscope run prog.py``, held to their own truth.

The programs (``apps/threads_program.py``, ``apps/mp_program.py``) were written with no thought
of streamscope: standard queues, threads and processes, no ``pipeline()``, no query. Each run is
a real ``streamscope run`` subprocess; the program measures its own workers' share of time spent
working, and its stdout must be what ``python prog.py`` prints.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from program_runs import (
    APPS,
    busy_share,
    occupancy,
    query_id,
    run_both,
    run_watched,
    worker_shares,
)

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.analysis import findings
from streamscope.report import render_report
from streamscope.report.shape import stages_on
from watched import cli


def test_an_unmodified_threaded_program(tmp_path: Path) -> None:
    """Reader -> 3 parser threads (10 ms of waiting work per item) -> writer, queues of 16: the parsers
    are the bottleneck, saturated by their own measure and the monitor's; the input queue is
    full most of the time and never over its capacity."""
    out, truth, _ = run_both(tmp_path, "threads_program.py", "450", beside=True)
    assert min(truth["parse_share"]) >= 0.9, truth  # the program's own: saturated
    with ss.load(out) as run:
        assert run.status == "completed"
        stages = {s.name for s in run.topology.stages}
        assert {"reader", "parser", "writer"} <= stages
        assert "main" not in stages  # its main thread only starts and joins threads
        channels = {c.name: c for c in run.topology.channels}
        assert set(channels) == {"reader -> parser", "parser -> writer"}
        assert channels["reader -> parser"].capacity == 16
        workers = [s for s in run.topology.stages if s.name == "parser"]
        assert workers and all(s.resource == "main" for s in workers)
        got = busy_share(run, "parser")
        assert abs(got - sum(truth["parse_share"]) / 3) <= 0.1, (got, truth)
        assert max(occupancy(run, "reader -> parser", "max")) <= 16
        means = occupancy(run, "reader -> parser", "mean")[1:-1]
        # The reader finds it full (16 but for a parser's take) frame after frame; a frame in
        # which a busy machine held the reader back reads less (7.8 and 11.2 were seen).
        assert sorted(means)[len(means) // 2] >= 14, means
        (neck,) = [f for f in findings(run) if f.kind == "bottleneck"]
        assert neck.target == "parser", neck.title
        # one stage, and the breakdown of its three workers (in the run file and the report)
        shares = worker_shares(run, "parser")
        assert len(shares) == 3 and all(s >= 0.85 for _, s in shares), shares
        html, _ = render_report(run)
        assert "worker 3</td>" in html


def test_a_programs_path_latency_is_its_mean_from_littles_law(tmp_path: Path) -> None:
    """Reader (Poisson, 800 a second) -> 3 parser threads (1-5 ms of waiting work) -> writer:
    the program's items cannot be followed through its own queues, so ``latency(reader ~>
    writer)`` is the mean from Little's law over the path, held to the program's own time of
    every item from the reader's put to the writer's get; the run says how it was found."""
    out, truth = tmp_path / "run.duckdb", tmp_path / "truth.json"
    query = "latency(reader ~> writer) every 30s"
    proc = subprocess.run(
        [*cli(), "run", str(APPS / "stamped_items.py"), "-o", str(out), "--quiet",
         "--query", query, "--", "2000", str(truth)],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Little's law" in proc.stderr  # said where the figures are shown
    times = json.loads(truth.read_text())
    with ss.load(out) as run:
        (frame,) = run.results(0, "reader ~> writer")
        notes = [t for about, t in run.notes() if about == "littles_law"]
    (mean,) = frame.points
    assert isinstance(mean, ScalarPoint)
    true_mean = sum(times) / len(times)
    print(f"Little's law {mean.value:.0f} ns, the program's {true_mean:.0f} ns")
    assert mean.value == pytest.approx(true_mean, rel=0.03)
    assert notes and "reader -> parser" in notes[0] and "parser -> writer" in notes[0]
    # Percentiles need each item's own time: refused, saying why and what can be asked.
    bad = subprocess.run(
        [*cli(), "run", str(APPS / "stamped_items.py"), "-o", str(tmp_path / "bad.duckdb"),
         "--query", "latency(reader ~> writer): p99", "--", "10", str(tmp_path / "t.json")],
        capture_output=True, text=True, timeout=300, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert bad.returncode != 0
    assert "only the mean" in bad.stderr and "latency(reader ~> writer): mean" in bad.stderr


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_an_unmodified_multiprocessing_program(tmp_path: Path, method: str) -> None:
    """Loader process -> 2 worker processes (20 ms of work per item) -> the main process: the
    workers are the bottleneck, each a worker of one stage on its own process; the queues are
    counted across processes, never over their capacity."""
    out, truth, _ = run_both(tmp_path, "mp_program.py", "120", method)
    assert min(truth["work_share"]) >= 0.9, truth
    with ss.load(out) as run:
        assert run.status == "completed"
        stages = {s.name for s in run.topology.stages}
        assert {"loader", "worker", "main"} <= stages
        assert {c.name for c in run.topology.channels} == {"loader -> worker", "worker -> main"}
        # one stage, a worker of it per process: each its own state probe and resource
        procs = [r for r in run.topology.resources if r.kind == "process"]
        assert len(procs) == 3, procs  # the loader and the two workers
        probes = [p for p in run.topology.probes if p.kind == "state" and p.target == "worker"]
        assert len(probes) == 2
        shares = worker_shares(run, "worker")
        assert len({r for r, _ in shares}) == 2, shares
        # and `show`'s resources table lists the stage on each of its processes
        on = stages_on(run)
        assert all(on[r] == ["worker"] for r, _ in shares), on
        # Over the frames both workers were at work by their own stamps (a spawned worker
        # may start a frame after the other: 0.84 over the run's frames, 0.96 by its stamps)
        lives = truth["windows"]
        both = (max(a for a, _ in lives), min(b for _, b in lives))
        got = busy_share(run, "worker", both)
        assert abs(got - sum(truth["work_share"]) / 2) <= 0.1, (got, truth)
        assert max(occupancy(run, "loader -> worker", "max")) <= 8
        # every item and both end markers, counted across the processes that put them (a rate
        # over the part of each frame the channel existed in: its first began with its first put)
        counted = sum(
            (p.value or 0.0) * f.covered_ns / 1e9
            for f in run.results(query_id(run, "throughput("), "loader -> worker")
            for p in f.points if isinstance(p, ScalarPoint) and p.stat == "mean"
        )  # fmt: skip
        assert counted == pytest.approx(122, abs=0.5)
        (neck,) = [f for f in findings(run) if f.kind == "bottleneck"]
        assert neck.target == "worker", neck.title


def test_a_program_that_raises_fails_the_run_and_keeps_it(tmp_path: Path) -> None:
    prog = tmp_path / "boom.py"
    prog.write_text(
        "import queue, threading\n"
        "q = queue.Queue(4)\n"
        "def eat():\n"
        "    while q.get() is not None: pass\n"
        "t = threading.Thread(target=eat); t.start()\n"
        "for i in range(100): q.put(i)\n"
        "q.put(None); t.join()\n"
        "print('before')\n"
        "raise RuntimeError('the program broke')\n"
    )
    out = tmp_path / "boom.duckdb"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stdout == "before\n"
    assert "RuntimeError: the program broke" in proc.stderr  # its traceback, as Python prints
    assert "Traceback" in proc.stderr
    with ss.load(out) as run:
        assert run.status == "failed"
        assert "the program broke" in (run.error or "")
        assert "main -> eat" in {c.name for c in run.topology.channels}


def test_a_program_exiting_non_zero_fails_the_run(tmp_path: Path) -> None:
    prog = tmp_path / "exits.py"
    prog.write_text("import sys\nprint('bye')\nsys.exit(3)\n")
    out = tmp_path / "exits.duckdb"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 3 and proc.stdout == "bye\n"  # its own status, as plain Python
    assert "exited with status 3" in proc.stderr


def test_a_program_ending_while_its_daemon_threads_work_ends_as_plainly(tmp_path: Path) -> None:
    """Daemon threads passing items around without end, as the program's main thread returns:
    the interpreter ends with them still at work, as plainly (status 0, its output), and the
    run completes. (The rings' mappings were unmapped as the interpreter ended, under threads
    still recording into them: killed by SIGSEGV, 8 runs in 10.)"""
    prog = tmp_path / "daemons.py"
    prog.write_text(
        "import queue, threading, time\n"
        "q = queue.Queue()\n"
        "def relay():\n"
        "    while True:\n"
        "        q.put(q.get())\n"
        "for _ in range(4):\n"
        "    threading.Thread(target=relay, daemon=True).start()\n"
        "for i in range(8):\n"
        "    q.put(i)\n"
        "time.sleep(0.3)\n"
        "print('bye')\n"
    )
    out = tmp_path / "daemons.duckdb"
    for _ in range(3):  # each run ends with the relays mid-record
        proc = subprocess.run(
            [*cli(), "run", str(prog), "-o", str(out), "--overwrite", "--quiet"],
            capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.returncode == 0 and proc.stdout == "bye\n", proc.stderr[-2000:]
        with ss.load(out) as run:
            assert str(run.status) == "completed"


def test_a_module_runs_as_python_dash_m_would(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "job.py").write_text(
        "import queue, sys, threading\n"
        "def consume(q):\n"
        "    while q.get() is not None: pass\n"
        "if __name__ == '__main__':\n"
        "    q = queue.Queue(8)\n"
        "    t = threading.Thread(target=consume, args=(q,)); t.start()\n"
        "    for i in range(int(sys.argv[1])): q.put(i)\n"
        "    q.put(None); t.join(); print('ran', sys.argv[1:])\n"
    )
    proc = subprocess.run(
        [*cli(), "run", "-m", "pkg.job", "-o", "m.duckdb", "--quiet", "--", "50", "x"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "ran ['50', 'x']\n"
    with ss.load(tmp_path / "m.duckdb") as run:
        assert run.meta.name == "pkg.job"
        assert {c.name for c in run.topology.channels} == {"main -> consume"}


def test_an_unmodified_asyncio_program(tmp_path: Path) -> None:
    """Producer task -> 2 consumer tasks (12 ms of waiting work per item) on one event loop:
    each task is a worker of the stage named after its coroutine, on the loop (a resource of
    its own); consumers awaiting get are blocked in, the producer awaiting put blocked out."""
    out, truth, _ = run_both(tmp_path, "async_program.py", "200", beside=True)
    assert min(truth["work_share"]) >= 0.9, truth
    assert truth["put_share"] >= 0.8, truth  # the producer mostly waits for room
    with ss.load(out) as run:
        assert run.status == "completed"
        stages = {s.name: s for s in run.topology.stages}
        assert {"produce", "consume"} <= set(stages)
        assert [c.name for c in run.topology.channels] == ["produce -> consume"]
        assert run.topology.channels[0].capacity == 8
        kinds = {r.name: r.kind for r in run.topology.resources}
        assert kinds[stages["consume"].resource] == "asyncio"
        probes = [p for p in run.topology.probes if p.kind == "state" and p.target == "consume"]
        assert len(probes) == 2  # a worker per task
        # Over the consumers' own working life (a loaded machine may hold the producer back
        # at the start, and the consumers wait for it there: blocked, truly).
        lives = truth["windows"]
        got = busy_share(run, "consume", (max(a for a, _ in lives), min(b for _, b in lives)))
        assert abs(got - sum(truth["work_share"]) / 2) <= 0.1, (got, truth)
        # The producer's frames inside its own life by its stamps (a loaded start may begin it
        # two frames into the run: frames before it are no frames of its), whole.
        lo, hi = truth["produce_window"]
        t0 = run.meta.t0_host_ns
        blocked = [
            dict(zip(d.labels, d.fractions, strict=True))["blocked_out"]
            for f in run.results(query_id(run, "state("), "produce")
            if lo <= t0 + f.t_start_ns and t0 + f.t_end_ns <= hi
            and isinstance(d := f.point("duty"), DutyPoint) and sum(d.fractions) >= 0.99
        ]  # fmt: skip
        # The program's own share of the producer's life in put, frame by frame on average (a
        # frame in which a loaded machine held the loop back reads less: 0.49 once).
        assert blocked and abs(sum(blocked) / len(blocked) - truth["put_share"]) <= 0.1, blocked
        assert max(occupancy(run, "produce -> consume", "max")) <= 8
        (neck,) = [f for f in findings(run) if f.kind == "bottleneck"]
        assert neck.target == "consume", neck.title


def test_an_event_loops_lag_is_measured(tmp_path: Path) -> None:
    """A task that blocks its loop for 30 ms every 100 ms: the loop's lag, measured by default,
    reaches most of a block and never more than the program's own heartbeat (a task waking
    every millisecond) saw its loop held up: a block, and whatever a busy machine added."""
    prog = tmp_path / "blocking.py"
    prog.write_text(
        "import asyncio, sys, time\n"
        "async def hog(q):\n"
        "    for i in range(25):\n"
        "        time.sleep(0.03)\n"  # blocks the loop, as a careless call would
        "        await q.put(i)\n"
        "        await asyncio.sleep(0.07)\n"
        "    await q.put(None)\n"
        "async def eat(q):\n"
        "    while await q.get() is not None: pass\n"
        "async def beat(done, held):\n"
        "    last = time.monotonic_ns()\n"
        "    while not done.is_set():\n"
        "        await asyncio.sleep(0.001)\n"
        "        now = time.monotonic_ns()\n"
        "        held[0], last = max(held[0], now - last), now\n"
        "async def main():\n"
        "    q, done, held = asyncio.Queue(4), asyncio.Event(), [0]\n"
        "    ticks = asyncio.create_task(beat(done, held))\n"
        "    await asyncio.gather(hog(q), eat(q))\n"
        "    done.set()\n"
        "    await ticks\n"
        "    open(sys.argv[1], 'w').write(str(held[0]))\n"
        "asyncio.run(main())\n"
    )
    out, held_file = tmp_path / "lag.duckdb", tmp_path / "held.txt"
    run_watched(prog, out, str(held_file))
    with ss.load(out) as run:
        qid = query_id(run, "timer(loop*.lag)")
        maxima = [
            float(p.value) for f in run.results(qid, "loop.lag") for p in f.points
            if isinstance(p, ScalarPoint) and p.stat == "max" and p.value is not None
        ]  # fmt: skip
    assert maxima, "no lag measured"
    held = float(held_file.read_text())
    print(f"lag at most {max(maxima) / 1e6:.1f} ms; the heartbeat waited up to {held / 1e6:.1f} ms")
    # (a lag sample is read a loop iteration after it was due: 1 ms of slack)
    assert 15e6 <= max(maxima) <= held + 1e6, (maxima, held)
