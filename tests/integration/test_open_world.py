"""Programs that make their queues as they go, run plainly and under ``streamscope run``: being
watched neither breaks them nor loses what they did before their queues were known."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import psutil

import streamscope as ss
from oracles import is_monitor
from streamscope.aggregate.points import ScalarPoint
from streamscope.analysis import findings
from watched import cli

APPS = Path(__file__).parent / "apps"


def _limit_fds(n: int):  # type: ignore[no-untyped-def]
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))

    return limit


def _watched(prog: str, out: Path, *args: str, frame: str = "") -> subprocess.CompletedProcess[str]:
    """``streamscope run PROG -o OUT --quiet [--frame F] -- ARGS``, a real subprocess."""
    framing = ["--frame", frame] if frame else []
    return subprocess.run(
        [*cli(), "run", prog, "-o", str(out), "--quiet", *framing, "--", *args],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip


def _stat(run: ss.Run, prefix: str, target: str, stat: str) -> list[float | None]:
    (q,) = [q for q in run.queries if q.text.startswith(prefix)]
    return [
        p.value
        for f in run.results(q.id, target)
        for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == stat
    ]


def _by_frame(run: ss.Run, prefix: str, target: str) -> dict[int, tuple[float, int]]:
    """A query's mean per frame of ``target``: frame -> (mean, covered ns)."""
    (q,) = [q for q in run.queries if q.text.startswith(prefix)]
    return {
        f.frame: (p.value, f.covered_ns)
        for f in run.results(q.id, target)
        for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
    }


def test_a_program_making_thousands_of_queues_runs_under_a_low_descriptor_limit(
    tmp_path: Path,
) -> None:
    """2,000 queues made one at a time, each with a producer and a consumer thread of its own,
    under ``ulimit -n 256``: the program's output as plain Python's, no error of streamscope's
    making, the descriptors it holds as few as plainly (a ring's mapping keeps none), and two
    stages and one channel, taken up by each new pair of threads and queue."""
    prog = str(APPS / "queues_one_at_a_time.py")
    plain = subprocess.run(
        [sys.executable, prog, "2000"], capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, preexec_fn=_limit_fds(256), check=False,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    out = tmp_path / "run.duckdb"
    proc = subprocess.run(
        [*cli(), "run", prog, "-o", str(out), "--quiet", "--", "2000"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL,
        preexec_fn=_limit_fds(256), check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout
    fds = [int(line.split()[1]) for line in proc.stderr.splitlines() if line.startswith("fds ")]
    plain_fds = int(plain.stderr.split()[-1])
    assert fds and fds[0] <= plain_fds + 4, (fds, plain_fds)  # the ring files hold none
    with ss.load(out) as run:
        assert run.status == "completed"
        # One producer and one consumer thread after another, each pair on a queue of its own:
        # the threads of one code take up the stage the last ones left, and a queue the channel
        # the dropped one left (two stages and one channel, not 2,000 of each).
        assert sorted(s.name for s in run.topology.stages) == ["consume", "produce"]
        assert len(run.topology.channels) == 1
        assert len(run.table("worker")["probe_id"]) == 2
        # Every item is counted all the same: 3 and the end marker per queue.
        (q,) = [q for q in run.queries if q.text.startswith("throughput")]
        items = sum(
            p.value * f.covered_ns / 1e9
            for f in run.results(q.id)
            for p in f.points
            if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
        )
        assert round(items) == 4 * 2000
    assert "Too many open files" not in proc.stderr


def test_items_queued_before_the_consumer_is_known_are_counted(tmp_path: Path) -> None:
    """500 items put before anyone takes: the channel holds them all and the end mark before it
    holds fewer, and their time in the queue is the program's own (its stamps) within 10 %."""
    prog = str(APPS / "prefilled_queue.py")
    out, truth = tmp_path / "run.duckdb", tmp_path / "truth.json"
    proc = _watched(prog, out, str(truth), frame="200ms")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "500\n"
    waited = json.loads(truth.read_text())["waited"]
    true_mean = sum(waited) / len(waited)
    with ss.load(out) as run:
        (ch,) = run.topology.channels
        assert ch.name == "main -> consume"
        most = _stat(run, "occupancy", ch.name, "max")
        # Every put is counted: the channel comes to hold the 500 items and the end mark, no more,
        # and rises to them without a fall (nothing is taken before the consumer starts). The
        # puts may straddle a frame's end (beside a busy core the first frame with any once held
        # 464), and a frame before the program got to them holds nothing.
        held = [m for m in most if m]
        assert held and max(held) == 501, most
        rise = held[: held.index(501) + 1]
        assert rise == sorted(rise), most
        # Each frame's latency mean, weighted by the items it removed (throughput x time).
        lat = _by_frame(run, "latency", ch.name)
        items = {
            f: v * covered / 1e9
            for f, (v, covered) in _by_frame(run, "throughput", ch.name).items()
        }
        assert lat and items
    weight = sum(items.get(f, 0.0) for f in lat)
    mean = sum(m * items.get(f, 0.0) for f, (m, _) in lat.items()) / weight
    assert abs(mean / 1e9 - true_mean) <= 0.1 * true_mean, (mean / 1e9, true_mean)


def _child_of(cli_pid: int, word: str) -> psutil.Process | None:
    """The process of ``streamscope run`` (``cli_pid``) whose command line has ``word``: the
    program (``asmain``)."""
    for child in psutil.Process(cli_pid).children(recursive=True):
        try:
            if word in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def test_a_queue_per_request_keeps_frames_on_time_and_the_monitor_flat(tmp_path: Path) -> None:
    """10,000 requests over 10 s, each with a reply queue of its own (made, used once,
    dropped): the program's output as plain Python's, every frame's lag well under the 2 s
    the issue allows (the first one included), the monitor's memory the same at the end as
    after 5 s, and as many channels as queues alive at once, not one per queue."""
    prog, args = str(APPS / "queue_per_request.py"), ["10000", "1000"]
    plain = subprocess.Popen(
        [sys.executable, prog, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    out = tmp_path / "run.duckdb"
    proc = subprocess.Popen(
        [*cli(), "run", prog, "-o", str(out), "--quiet", "--", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    rss: list[int] = []
    t0 = time.monotonic()
    monitor = program = None
    while proc.poll() is None and time.monotonic() - t0 < 300:
        monitor = monitor or next(
            (c for c in psutil.Process(proc.pid).children(recursive=True) if is_monitor(c)), None
        )
        program = program or _child_of(proc.pid, "asmain")
        if monitor is not None and program is not None and time.monotonic() - t0 >= 5:
            # While the program runs: what the monitor takes to finish the run afterwards
            # (its summaries, the file's last writes) is not what it holds as the run goes on.
            try:
                if program.status() == psutil.STATUS_ZOMBIE:
                    break
            except psutil.NoSuchProcess:
                break
            try:
                rss.append(monitor.memory_info().rss)
            except psutil.NoSuchProcess:
                break
        time.sleep(1)
    stdout, stderr = proc.communicate(timeout=300)
    plain_out, _ = plain.communicate(timeout=300)
    assert proc.returncode == 0, stderr[-3000:]
    assert stdout == plain_out
    assert len(rss) >= 2, rss
    # Flat: what it holds once warm (5 s in) is what it holds at the end, within what its
    # file's buffers take; a channel kept per queue grew it by 5 MB a second.
    assert max(rss) - rss[0] <= 12 << 20, [r >> 20 for r in rss]
    with ss.load(out) as run:
        lags = run.table("monitor")["lag_ns"]
        # On time, the first one too: a monitor falling behind reads 1 s, where it holds.
        assert max(lags) < 1_000_000_000, lags
        names = {c.name for c in run.topology.channels}
        assert "client -> worker" in names
        replies = [n for n in names if n.startswith("worker -> client")]
        assert 1 <= len(replies) <= 16, replies  # queues alive at once, not 10,000
        (q,) = [q for q in run.queries if q.text.startswith("throughput")]
        carried = sum(
            p.value * (f.covered_ns / 1e9)
            for f in run.results(q.id)
            if f.target in replies
            for p in f.points
            if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
        )
        assert abs(carried - 10000) <= 100, carried  # every reply counted, once


def test_a_task_per_item_is_measured_by_a_bounded_set_of_workers(tmp_path: Path) -> None:
    """2,000 asyncio tasks, one per item, made in a burst: the program's output as plain
    Python's, its stage ``handle`` measured by at most 128 workers at a time (reused as tasks
    finish; without the bound this program has 500 alive at once), not one per task, and its
    results' channel counted whole."""
    prog = str(APPS / "task_per_item.py")
    plain = subprocess.run(
        [sys.executable, prog, "2000"], capture_output=True, text=True, timeout=300,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    out = tmp_path / "run.duckdb"
    proc = _watched(prog, out, "2000")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == plain.stdout
    with ss.load(out) as run:
        workers = [p for p in run.topology.probes if p.kind == "state" and p.target == "handle"]
        assert 1 <= len(workers) <= 128, len(workers)
        assert {c.name for c in run.topology.channels} == {"handle -> consume"}
        (q,) = [q for q in run.queries if q.text.startswith("throughput")]
        carried = sum(
            p.value * (f.covered_ns / 1e9)
            for f in run.results(q.id, "handle -> consume")
            for p in f.points
            if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
        )
        assert abs(carried - 2000) <= 20, carried


def test_a_process_queue_read_only_at_the_end_holds_its_items(tmp_path: Path) -> None:
    """A producer process fills a multiprocessing queue the main process reads only at the
    end: the channel, known from the first get, holds all 200 results then, and held each
    from its put (the program's own clock says how long: the integral of the occupancy), so
    its latency is their mean wait and Little's law holds."""
    out = tmp_path / "run.duckdb"
    proc = _watched(str(APPS / "results_read_at_end.py"), out, frame="200ms")
    assert proc.returncode == 0, proc.stderr[-3000:]
    total, held = proc.stdout.split()
    assert int(total) == sum(range(200))
    truth = float(held)  # item-seconds, about 200 x 0.6 s
    with ss.load(out) as run:
        (ch,) = run.topology.channels
        assert ch.name == "producer -> main"
        most = [v for v in _stat(run, "occupancy", ch.name, "max") if v is not None]
        assert most and max(most) == 200, most
        occ = _by_frame(run, "occupancy", ch.name)
        measured = sum(mean * cov / 1e9 for mean, cov in occ.values())
        assert abs(measured - truth) < 0.02 + 0.02 * truth, (measured, truth)
        # Each frame's latency mean weighted by the items it removed: the reads may straddle a
        # frame's end (beside a busy core they did, the first frame's items having waited
        # longest), so no one frame need hold the mean wait.
        lat = _by_frame(run, "latency", ch.name)
        removed = {
            f: v * covered / 1e9
            for f, (v, covered) in _by_frame(run, "throughput", ch.name).items()
        }
        weight = sum(removed.get(f, 0.0) for f in lat)
        assert lat and round(weight) == 200, (lat, removed)
        mean = sum(m * removed.get(f, 0.0) for f, (m, _) in lat.items()) / weight / 1e9
        assert abs(mean - truth / 200) < 0.02, (lat, removed, truth / 200)
        law = [f for f in findings(run) if f.kind == "littles_law" and f.target == ch.name]
        assert len(law) == 1 and law[0].severity == "info", law[0].detail


def test_reply_queues_made_and_dropped_by_many_threads_at_once(tmp_path: Path) -> None:
    """Six client threads each making a reply queue per request (the channels of dropped
    queues taken up by the next, from several threads at once): the program ends as plainly,
    with no error of streamscope's, and every request is counted on its channels."""
    prog = str(APPS / "reply_queues_many_clients.py")
    plain = subprocess.run(
        [sys.executable, prog, "1500"], capture_output=True, text=True, timeout=120,
        stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert plain.returncode == 0, plain.stderr[-2000:]
    out = tmp_path / "run.duckdb"
    # A worker that died of an error of streamscope's leaves its client waiting for ever: the
    # run's own time limit stops it then.
    proc = subprocess.run(
        [*cli(), "run", prog, "-o", str(out), "--quiet", "--timeout", "60s", "--", "1500"],
        capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    assert proc.stdout == plain.stdout
    with ss.load(out) as run:
        (q,) = [q for q in run.queries if q.text.startswith("throughput")]
        replies = [c.name for c in run.topology.channels if c.src == "worker"]
        # Items out of the reply channels: each frame's mean rate over its covered time.
        items = sum(
            p.value * f.covered_ns / 1e9
            for name in replies
            for f in run.results(q.id, name)
            for p in f.points
            if isinstance(p, ScalarPoint) and p.stat == "mean" and p.value is not None
        )
    assert round(items) == 6 * 1500


def test_the_time_items_wait_for_a_consumer_counts_in_occupancy(tmp_path: Path) -> None:
    """Items put 1.2 s before their queue's consumer is known: the channel begins with its
    first put, so its occupancy over the frames holds the items while they waited. The oracle
    is the program's own clock: the time the items of a channel spent in it (item-seconds)
    is the integral of its occupancy, and its latency their mean wait (Little's law)."""
    out = tmp_path / "run.duckdb"
    proc = _watched(str(APPS / "put_long_before_get.py"), out, "1.2", frame="250ms")
    assert proc.returncode == 0, proc.stderr[-3000:]
    waits = [float(x) for x in proc.stdout.split()]
    assert len(waits) == 6 and min(waits) > 1.2
    with ss.load(out) as run:
        chans = [c.name for c in run.topology.channels]
        assert len(chans) == 3
        for k, name in enumerate(chans):
            truth = sum(waits[2 * k : 2 * k + 2])  # item-seconds in this channel
            occ = _by_frame(run, "occupancy", name)
            held = sum(mean * cov / 1e9 for mean, cov in occ.values())
            assert abs(held - truth) < 0.02 + 0.02 * truth, (name, held, truth)
            lat = _stat(run, "latency", name, "mean")
            assert any(v is not None and abs(v / 1e9 - truth / 2) < 0.02 for v in lat), lat
