"""Unmodified programs' pools under ``streamscope run``: thread and process executors and
``multiprocessing.Pool``, each pool a stage of its workers, held to the program's own stamps."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from program_runs import busy_share, worker_shares

import streamscope as ss
from streamscope.analysis import findings
from watched import cli


def test_a_thread_pool_executor_is_a_stage_fed_by_its_submitter(tmp_path: Path) -> None:
    """``concurrent.futures.ThreadPoolExecutor``: its workers are one stage, named after the
    function its calls run, its work queue the channel from the thread that submits; 4
    workers on 5 ms calls, 600 calls submitted at once, are saturated while the backlog
    lasts."""
    prog = tmp_path / "pool.py"
    prog.write_text(
        "import time\n"
        "from concurrent.futures import ThreadPoolExecutor\n"
        "def fetch(i):\n"
        "    time.sleep(0.005)\n"
        "    return i * 2\n"
        "with ThreadPoolExecutor(max_workers=4) as ex:\n"
        "    print('total', sum(ex.map(fetch, range(600))))\n"
    )
    out = tmp_path / "pool.duckdb"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet", "--frame", "200ms"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == f"total {sum(2 * i for i in range(600))}\n"
    with ss.load(out) as run:
        (channel,) = run.topology.channels
        assert channel.name == "main -> fetch"
        probes = [p for p in run.topology.probes if p.kind == "state" and p.target == channel.dst]
        assert len(probes) == 4  # a worker per thread
        assert busy_share(run, channel.dst) >= 0.9


POOLS = {
    "pool": "    with mp.get_context(sys.argv[1]).Pool(2) as pool:\n"
    "        stamps = pool.map(parse, range(150), chunksize=1)\n",
    "executor": "    from concurrent.futures import ProcessPoolExecutor\n"
    "    with ProcessPoolExecutor(2, mp_context=mp.get_context(sys.argv[1])) as ex:\n"
    "        stamps = list(ex.map(parse, range(150)))\n",
}


@pytest.mark.parametrize("method", ["fork", "spawn"])
@pytest.mark.parametrize("kind", ["pool", "executor"])
def test_a_process_pool_is_a_stage_of_its_workers(tmp_path: Path, kind: str, method: str) -> None:
    """``Pool.map(parse, ...)`` (or ``ProcessPoolExecutor.map``) with 2 workers and 150 calls of
    10 ms handed out at once: the stage ``parse`` has a worker per pool process, and is at
    least as busy as the program's own stamps say (each call reports its process, start and
    end), over the frames in which both processes were at work by those stamps: a call is
    busy all along. What the stamps do not cover, between calls, is the library's: the worker
    hands back its result (busy) and takes the next task (blocked in while it waits for it;
    here the tasks wait for the workers, so that is short). A busy machine stretches the
    first: a worker that has sent its result is preempted by the thread it woke (the pool's
    result handler) and waits, runnable, for a core; beside a CPU hog and another test the
    stamps covered 0.87-0.91 of the workers' time while they were busy 0.99 by the monitor
    (that far, the test once took the stamps for the whole truth). Each item it timed took
    the call's 10 ms at least."""
    prog = tmp_path / "pool.py"
    prog.write_text(
        "import json, multiprocessing as mp, os, sys, time\n"
        "def parse(i):\n"
        "    t = time.perf_counter()\n"
        "    while time.perf_counter() - t < 0.010:\n"
        "        pass\n"
        "    return os.getpid(), t, time.perf_counter()\n"
        "if __name__ == '__main__':\n" + POOLS[kind] + "    share = {}\n"
        "    for pid in {p for p, _, _ in stamps}:\n"
        "        mine = [(a, b) for p, a, b in stamps if p == pid]\n"
        "        span = max(b for _, b in mine) - min(a for a, _ in mine)\n"
        "        share[pid] = sum(b - a for a, b in mine) / span\n"
        "    spans = {p: [min(a for q, a, _ in stamps if q == p), max(b for q, _, b in stamps"
        " if q == p)] for p in share}\n"
        "    json.dump({'share': share, 'spans': spans}, open(sys.argv[2], 'w'))\n"
        "    print('done', len(stamps))\n"
    )
    out, truth = tmp_path / "pool.duckdb", tmp_path / "truth.json"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet", "--frame", "100ms", "--", method,
         str(truth)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "done 150\n"
    stamped = json.loads(truth.read_text())
    own, spans = stamped["share"], stamped["spans"]
    assert len(own) == 2, own
    with ss.load(out) as run:
        assert "parse" in {s.name for s in run.topology.stages}
        shares = worker_shares(run, "parse")
        assert len({r for r, _ in shares}) == 2, shares
        # Frame by frame, over the frames in which both processes were at work by their own
        # stamps (perf_counter: the monotonic clock, s), at least as busy as those stamps say
        # (less the frames' edges: a hundredth or two).
        both = (
            int(max(a for a, _ in spans.values()) * 1e9),
            int(min(b for _, b in spans.values()) * 1e9),
        )
        got = busy_share(run, "parse", both)
        assert got >= sum(own.values()) / 2 - 0.02, (got, own)
        # Each item it timed took at least the call's 10 ms: a worker's first task was taken
        # before it knew its stage, and its result's put was timed as a source's item (to the
        # next take: 0.02-2 ms, one such sample per worker, its service mean 2-3 % short)
        _, rows = run.sql("SELECT min(wall_ns), count(*) FROM service WHERE stage = 'parse'")
        assert rows[0][1] > 0 and rows[0][0] >= 10_000_000, rows


def test_a_pools_first_tasks_leave_its_task_queue_when_its_workers_take_them(
    tmp_path: Path,
) -> None:
    """``Pool.map`` as its documentation shows it, 6 calls of 50 ms on 2 workers: a worker takes
    its first task before it knows the function it applies (the stage at the task queue's
    head), so those removals come before the channel is declared. Each is recorded at its own
    time all the same: the k-th removal comes no later than the k-th call began by the
    program's own stamps (a task is taken before it starts), and Little's law holds on the
    channel. (They were stamped at the declaration, a call later, and the first was lost:
    L / λW read 0.5 on the documentation's own example.) The pool's end markers are no
    items: 6 tasks in and out, not 8."""
    prog = tmp_path / "pool.py"
    prog.write_text(
        "import json, sys, time\n"
        "from multiprocessing import Pool\n"
        "def work(i):\n"
        "    began = time.perf_counter()\n"
        "    time.sleep(0.05)\n"
        "    return began\n"
        "if __name__ == '__main__':\n"
        "    handed = time.perf_counter()\n"
        "    with Pool(2) as pool:\n"
        "        began = pool.map(work, range(6))\n"
        "    json.dump({'handed': handed, 'began': began}, open(sys.argv[1], 'w'))\n"
    )
    out, truth = tmp_path / "pool.duckdb", tmp_path / "truth.json"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet", "--", str(truth)],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    stamped = json.loads(truth.read_text())
    began = sorted(int(t * 1e9) for t in stamped["began"])  # perf_counter: the host's clock
    with ss.load(out) as run:
        assert {c.name for c in run.topology.channels} == {"main -> work"}
        _, rows = run.sql(
            "SELECT r.value, r.ticks FROM record r JOIN probe p ON r.probe_id = p.id "
            "WHERE p.target = 'main -> work' AND p.kind = 'head' ORDER BY r.value"
        )
        taken = dict(rows)
        # every task's removal recorded, and nothing else: the end marker the pool gives each
        # worker as it ends is its own (counted, 2 of the 8 items were markers)
        assert list(taken) == list(range(1, len(began) + 1)), taken
        assert _ends(run)[("main -> work", "tail")] == (len(began), len(began))
        for k, start in enumerate(began, start=1):
            assert int(stamped["handed"] * 1e9) <= taken[k] <= start, (k, taken[k], start)
        (law,) = [f for f in findings(run) if f.kind == "littles_law"]
        assert law.severity == "info", law.title


EXECUTOR_RESULTS = {
    "executor": "    import concurrent.futures\n"
    "    with concurrent.futures.ProcessPoolExecutor(max_workers=2) as executor:\n"
    "        got = list(executor.map(work, range(12)))\n",
    "joblib": "    from joblib import Parallel, delayed\n"
    "    got = Parallel(n_jobs=2)(delayed(work)(i) for i in range(12))\n",
}


@pytest.mark.parametrize("kind", sorted(EXECUTOR_RESULTS))
def test_a_process_executors_results_are_the_calls_it_ran(tmp_path: Path, kind: str) -> None:
    """A ``ProcessPoolExecutor``'s ``map`` (and joblib's ``Parallel``, on loky's executor), as
    their documentation shows them: the result channel carries what the workers' calls
    returned, every one of them taken, and Little's law holds on it. (Each worker also puts
    its pid into the result queue as it exits, which the executor's manager may never read:
    counted as items, they sat in the channel to the end, and L / λW read 8.6 and 33.) The
    call channel carries the calls, not the end marker each worker is told to end by (12
    calls read 14)."""
    prog = tmp_path / "pool.py"
    prog.write_text(
        "import json, sys, time\n"
        "def work(i):\n"
        "    time.sleep(0.01)\n"
        "    return i * i\n"
        "if __name__ == '__main__':\n" + EXECUTOR_RESULTS[kind] + "    print(sum(got))\n"
    )
    out = tmp_path / "pool.duckdb"
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet"],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == f"{sum(i * i for i in range(12))}\n"
    with ss.load(out) as run:
        assert "work -> main" in {c.name for c in run.topology.channels}
        _, rows = run.sql(
            "SELECT p.kind, max(r.value) FROM record r JOIN probe p ON r.probe_id = p.id "
            "WHERE p.target = 'work -> main' GROUP BY p.kind"
        )
        last = dict(rows)
        assert last["tail"] == last["head"], last  # every result put was taken
        calls = _ends(run)
        assert calls[("main -> work", "tail")] == calls[("main -> work", "head")], calls
        if kind == "executor":
            assert last["tail"] == 12, last  # a result per call (joblib batches them)
            assert calls[("main -> work", "tail")] == (12, 12), calls  # no end markers
        law = [f for f in findings(run) if f.kind == "littles_law" and f.target == "work -> main"]
        assert [f.severity for f in law] == ["info"], [f.title for f in law]


def _watched(tmp_path: Path, source: str, *args: str) -> tuple[Path, str]:
    """``source`` run as a program under ``streamscope run``: its run file and its stdout."""
    prog, out = tmp_path / "prog.py", tmp_path / "prog.duckdb"
    prog.write_text(source)
    proc = subprocess.run(
        [*cli(), "run", str(prog), "-o", str(out), "--quiet", "--", *args],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out, proc.stdout


def _ends(run: ss.Run) -> dict[tuple[str, str], tuple[int, int]]:
    """Per channel and end (``tail``, ``head``): its records, and the last item they count."""
    _, rows = run.sql(
        "SELECT p.target, p.kind, count(*), max(r.value) FROM record r "
        "JOIN probe p ON r.probe_id = p.id WHERE p.kind IN ('tail', 'head') "
        "GROUP BY p.target, p.kind"
    )
    return {(t, k): (n, last) for t, k, n, last in rows}


def _laws(run: ss.Run) -> dict[str, str]:
    """Each channel's Little's law finding's severity."""
    return {f.target: f.severity for f in findings(run) if f.kind == "littles_law"}


def test_a_managers_queues_are_channels_between_the_processes_that_use_them(
    tmp_path: Path,
) -> None:
    """``Manager().Queue()``, as the ``multiprocessing`` documentation lists it: the queue lives
    in the manager's process, and the program's processes reach it through proxies. Its work
    queue is the channel from the main process to the workers' stage and its result queue the
    one back, every item counted in and out (200 numbers and a ``None`` per worker), and
    Little's law holds on both. (Nothing of such a program was seen.)"""
    out, stdout = _watched(
        tmp_path,
        "import time\n"
        "from multiprocessing import Manager, Process\n"
        "def worker(q, r):\n"
        "    while (x := q.get()) is not None:\n"
        "        time.sleep(0.002)\n"
        "        r.put(x * 2)\n"
        "if __name__ == '__main__':\n"
        "    with Manager() as m:\n"
        "        q, r = m.Queue(), m.Queue()\n"
        "        ps = [Process(target=worker, args=(q, r)) for _ in range(2)]\n"
        "        for p in ps:\n"
        "            p.start()\n"
        "        for i in range(200):\n"
        "            q.put(i)\n"
        "        for _ in ps:\n"
        "            q.put(None)\n"
        "        print(sum(r.get() for _ in range(200)))\n"
        "        for p in ps:\n"
        "            p.join()\n",
    )
    assert stdout == f"{sum(2 * i for i in range(200))}\n"
    with ss.load(out) as run:
        assert {c.name for c in run.topology.channels} == {"main -> worker", "worker -> main"}
        probes = [p for p in run.topology.probes if p.kind == "state" and p.target == "worker"]
        assert len(probes) == 2  # a worker per process
        ends = _ends(run)
        for end in ("tail", "head"):
            assert ends[("main -> worker", end)] == (202, 202), ends
            assert ends[("worker -> main", end)] == (200, 200), ends
        assert _laws(run) == {"main -> worker": "info", "worker -> main": "info"}


def test_a_pipes_directions_are_channels_between_its_two_processes(tmp_path: Path) -> None:
    """``multiprocessing.Pipe()``, as its documentation shows it: the main process sends
    numbers to a child, which answers each doubled. Each direction is a channel, every
    message counted in and out (200 and a ``None`` one way, 200 back), and Little's law holds
    on both; ``multiprocessing``'s own pipes (inside its queues, its pools) are no channels of
    the program's. (Nothing of such a program was seen.)"""
    out, stdout = _watched(
        tmp_path,
        "import time\n"
        "from multiprocessing import Pipe, Process\n"
        "def double(conn):\n"
        "    while (x := conn.recv()) is not None:\n"
        "        time.sleep(0.001)\n"
        "        conn.send(2 * x)\n"
        "    conn.close()\n"
        "if __name__ == '__main__':\n"
        "    parent_conn, child_conn = Pipe()\n"
        "    p = Process(target=double, args=(child_conn,))\n"
        "    p.start()\n"
        "    total = 0\n"
        "    for i in range(200):\n"
        "        parent_conn.send(i)\n"
        "        total += parent_conn.recv()\n"
        "    parent_conn.send(None)\n"
        "    p.join()\n"
        "    print(total)\n",
    )
    assert stdout == f"{sum(2 * i for i in range(200))}\n"
    with ss.load(out) as run:
        assert {c.name for c in run.topology.channels} == {"main -> double", "double -> main"}
        ends = _ends(run)
        for end in ("tail", "head"):
            assert ends[("main -> double", end)] == (201, 201), ends
            assert ends[("double -> main", end)] == (200, 200), ends
        assert _laws(run) == {"main -> double": "info", "double -> main": "info"}


def test_an_asyncio_tasks_calls_run_in_a_thread_pool_are_the_tasks_to_hand_out(
    tmp_path: Path,
) -> None:
    """``loop.run_in_executor(pool, blocking, i)`` from ``async def main()``, as the asyncio
    documentation shows it: the task hands the calls to the pool, so the pool's queue is the
    channel from the task's stage (``main``) to ``blocking``, and the thread running the event
    loop is no stage of its own. (It put the calls and the pool's wake-up at its shutdown, and
    came out as a second stage ``main #2`` beside the task's.)"""
    out, stdout = _watched(
        tmp_path,
        "import asyncio, concurrent.futures, time\n"
        "def blocking(x):\n"
        "    time.sleep(0.005)\n"
        "    return x\n"
        "async def main():\n"
        "    loop = asyncio.get_running_loop()\n"
        "    with concurrent.futures.ThreadPoolExecutor(4) as pool:\n"
        "        rs = await asyncio.gather(\n"
        "            *(loop.run_in_executor(pool, blocking, i) for i in range(100)))\n"
        "    print(sum(rs))\n"
        "asyncio.run(main())\n",
    )
    assert stdout == f"{sum(range(100))}\n"
    with ss.load(out) as run:
        assert {c.name for c in run.topology.channels} == {"main -> blocking"}
        assert {s.name for s in run.topology.stages} == {"main", "blocking"}
        assert _ends(run)[("main -> blocking", "head")][0] >= 100  # the calls (and the wake-up)


THREAD_POOLS = {
    "ThreadPool": "from multiprocessing.pool import ThreadPool\n"
    "with ThreadPool(4) as pool:\n"
    "    print(sum(pool.map(f, range(200))))\n",
    "ThreadPool imap": "from multiprocessing.pool import ThreadPool\n"
    "with ThreadPool(4) as pool:\n"
    "    print(sum(pool.imap(f, range(200))))\n",
    "joblib threads": "from joblib import Parallel, delayed\n"
    "print(sum(Parallel(n_jobs=4, prefer='threads')(delayed(f)(i) for i in range(200))))\n",
}


@pytest.mark.parametrize("kind", sorted(THREAD_POOLS))
def test_a_thread_pool_is_a_stage_of_its_threads(tmp_path: Path, kind: str) -> None:
    """``multiprocessing.pool.ThreadPool`` (and joblib's ``Parallel`` preferring threads, which
    runs on one), as their documentation shows them: its threads are the stage of the function
    they apply (``f``, four workers), its task queue the channel from the caller's stage, every
    task counted in and out (the pool's end markers are its own), and Little's law holds; the
    caller, which only waits for the results (0.2 s of calls on four threads), is blocked in
    most of the time. (Nothing of such a program was seen: the pool makes its queues for
    itself and its threads run its loop; waiting on ``imap``'s results read busy 99 %.)"""
    out, stdout = _watched(
        tmp_path,
        "import time\ndef f(x):\n    time.sleep(0.004)\n    return x * x\n" + THREAD_POOLS[kind],
    )
    assert stdout == f"{sum(x * x for x in range(200))}\n"
    with ss.load(out) as run:
        assert {c.name for c in run.topology.channels} == {"main -> f"}
        assert {s.name for s in run.topology.stages} == {"main", "f"}
        probes = [p for p in run.topology.probes if p.kind == "state" and p.target == "f"]
        assert len(probes) == 4  # a worker per thread
        ends = _ends(run)
        assert ends[("main -> f", "tail")] == ends[("main -> f", "head")], ends
        assert _laws(run) == {"main -> f": "info"}
        _, ((waited,),) = run.sql(
            "SELECT avg(value) FROM stat WHERE target = 'main' AND stat = 'duty.blocked_in'"
        )
        assert waited > 0.5, waited


LEFT_BEHIND = """
import queue, sys, threading, time
q = queue.Queue()
def consume():
    for _ in range(80):
        q.get()
        time.sleep(0.005)
t = threading.Thread(target=consume)
t.start()
for i in range(100):
    q.put(i)
    time.sleep(0.002)
t.join()
print(q.qsize())
"""


def test_a_program_that_ends_with_items_queued_is_held_to_littles_law_on_what_came_out(
    tmp_path: Path,
) -> None:
    """A consumer takes 80 of the 100 items put and ends; the program ends with the rest
    queued. Those items count in the mean occupancy L (their time in the queue until the end)
    and in neither the throughput (removals) nor the latency (they never came out): the run
    says how many the queue held at its end, as the program counts them, and Little's law is
    checked on L less their time (it read L / λW = 1.65, "does not hold")."""
    out, stdout = _watched(tmp_path, LEFT_BEHIND)
    left = int(stdout)
    assert left == 20
    with ss.load(out) as run:
        _, rows = run.sql("SELECT channel, items, ns FROM leftover")
        assert [(c, n) for c, n, _ in rows] == [("main -> consume", left)], rows
        (law,) = [f for f in findings(run) if f.kind == "littles_law"]
        assert law.severity == "info", law.detail
        assert law.evidence["left_items"] == left
        assert law.evidence["L_with_left_items"] > law.evidence["L_items"]
