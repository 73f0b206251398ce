"""What an unmodified asyncio program's task waits on besides queues, under ``streamscope run``:
a task awaiting the end of its ``TaskGroup``, a ``gather`` or another task is idle (its own
work is over, as a thread joining threads is); one awaiting ``asyncio.wait`` is blocked in (as
a thread waiting on futures is). The truth: the program's own stamps of each wait."""

from __future__ import annotations

import json
from pathlib import Path

from program_runs import run_both, run_watched, worker_shares

import streamscope as ss
from streamscope.analysis.breakdown import stage_breakdown


def test_a_task_waiting_on_its_tasks_is_not_busy(tmp_path: Path) -> None:
    out, truth, _ = run_both(tmp_path, "awaits.py")
    waits = truth["waits"]
    with ss.load(out) as run:
        t = run.table("worker")
        rows = [i for i in range(len(t["stage"])) if t["stage"][i] == "main"]
        assert len(rows) == 1, list(t["stage"])
        ns = {s: int(t[f"{s}_ns"][rows[0]]) for s in ("idle", "busy", "blocked_in", "blocked_out")}
    joined = waits["task_group"] + waits["gather"] + waits["task"]
    # Idle all the while it awaits its tasks' ends but for making the tasks (microseconds),
    # and once it is done; blocked in only inside asyncio.wait (1 ms: the trackers' and the
    # stamps' instants are taken a few calls apart); busy hardly at all.
    assert ns["idle"] >= 0.9 * joined, (ns, waits)
    assert 0.9 * waits["wait"] <= ns["blocked_in"] <= waits["wait"] + 1e6, (ns, waits)
    assert ns["busy"] <= 0.1 * truth["life"], (ns, truth)


def test_a_worker_whose_work_is_over_is_not_idle_ever_after(tmp_path: Path) -> None:
    """Two threads run one function on one queue: one stops after 20 items, the other takes
    the other hundred. The one that stopped is gone, not idle for the rest of the run: each
    worker's busy share of its known time, and the stage's over its working life, are what
    the program's own stamps say (before, one that stopped after five items read 0.06, and
    the stage about half)."""
    prog = tmp_path / "leaver.py"
    prog.write_text(
        "import json, queue, sys, threading, time\n"
        "q = queue.Queue(4)\n"
        "lives = []\n"
        "def work(most):\n"
        "    worked, n, first = 0, 0, time.perf_counter_ns()\n"
        "    while n < most and (item := q.get()) is not None:\n"
        "        t = time.perf_counter_ns()\n"
        "        time.sleep(0.01)\n"
        "        worked += time.perf_counter_ns() - t\n"
        "        n += 1\n"
        "    lives.append((worked, time.perf_counter_ns() - first))\n"
        "threads = [threading.Thread(target=work, args=(m,)) for m in (20, 10**9)]\n"
        "for t in threads: t.start()\n"
        "for i in range(120): q.put(i)\n"
        "q.put(None)\n"
        "for t in threads: t.join()\n"
        "json.dump(sorted(lives), open(sys.argv[1], 'w'))\n"
    )
    out, truth_path = tmp_path / "run.duckdb", tmp_path / "truth.json"
    run_watched(prog, out, str(truth_path), frame="100ms")
    lives = json.loads(truth_path.read_text())  # each worker's (worked, life), ns
    with ss.load(out) as run:
        shares = [s for _, s in worker_shares(run, "work")]
        (work,) = [b for b in stage_breakdown(run) if b.stage == "work"]
    assert len(shares) == 2, shares
    # (each life by the stamps from just before its first get, when its tracker starts)
    truth = sorted(w / life for w, life in lives)
    assert all(abs(s - t) <= 0.1 for s, t in zip(sorted(shares), truth, strict=True)), (
        shares,
        lives,
    )
    true_share = sum(w for w, _ in lives) / sum(life for _, life in lives)
    assert work.busy is not None and work.busy >= true_share - 0.1, (work, lives)


def test_the_stages_a_main_thread_worked_in_end_with_its_code(tmp_path: Path) -> None:
    """A synchronous streamz stream run by the main thread, whose program then spends half a
    second in an exit handler: the stream's stage (``slow``) is in no state once the
    program's code is over, not waiting for items through the exit (its known time is its
    life by the program's own stamps, give or take a frame's edge, not that and the half
    second)."""
    prog = tmp_path / "stream_exit.py"
    prog.write_text(
        "import atexit, json, sys, time\n"
        "from streamz import Stream\n"
        "stamps = []\n"
        "def slow(x):\n"
        "    t = time.perf_counter_ns()\n"
        "    time.sleep(0.005)\n"
        "    stamps.append((t, time.perf_counter_ns()))\n"
        "    return x\n"
        "out = []\n"
        "source = Stream()\n"
        "source.map(slow).sink(out.append)\n"
        "for i in range(60):\n"
        "    source.emit(i)\n"
        "json.dump([stamps[0][0], stamps[-1][1]], open(sys.argv[1], 'w'))\n"
        "atexit.register(time.sleep, 0.5)\n"
    )
    out, truth_path = tmp_path / "run.duckdb", tmp_path / "truth.json"
    run_watched(prog, out, str(truth_path))
    first, last = json.loads(truth_path.read_text())
    with ss.load(out) as run:
        t = run.table("worker")
        (row,) = [i for i in range(len(t["stage"])) if t["stage"][i] == "slow"]
        known = sum(int(t[f"{s}_ns"][row]) for s in ("idle", "busy", "blocked_in", "blocked_out"))
    assert known < (last - first) + 250_000_000, (known, last - first)
