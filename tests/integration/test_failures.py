"""How runs end badly: a stage that raises, Ctrl-C, a killed application, overflowing tap buffers.

Every test but the overflow ones runs the real ``streamscope run`` in a subprocess (in its own
session, so a signal reaches exactly the processes it is meant for), watches the processes it
starts, and then reads the run file back: whatever way a run ends, the file is finished, holds
every frame up to the end, and no process of the run is left behind.
"""

from __future__ import annotations

import math
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

import streamscope as ss
from oracles import is_monitor
from streamscope.aggregate.points import HistogramPoint, ScalarPoint
from streamscope.runtime import RunOptions, run
from streamscope.store.reader import Run, load
from streamscope.store.writer import InMemoryStore
from watched import APP, FRAME_LINE, Watched, cli, start_steady, wait_for_frames

FRAME_NS = 100_000_000


def failure_line() -> int:
    """The line of steady.py that raises, as a stage error must report it."""
    lines = APP.read_text().splitlines()
    return next(i for i, text in enumerate(lines, start=1) if "# the planned failure" in text)


def check_frames_cover_the_run(run: Run, target: str = "src -> work") -> list[int]:
    """Frames 0..n-1, back to back, exactly as many as the run lasted; returns their numbers."""
    assert run.duration_ns is not None
    frames = run.results(0, target)
    numbers = [f.frame for f in frames]
    assert numbers == list(range(len(frames)))
    assert [f.t_start_ns for f in frames] == [k * FRAME_NS for k in numbers]
    assert len(frames) == math.ceil(run.duration_ns / FRAME_NS)
    assert sum(f.covered_ns for f in frames) == pytest.approx(run.duration_ns, abs=1_000)
    return numbers


# -- a stage raises -------------------------------------------------------------------------------


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_a_failing_stage_fails_the_run_and_keeps_its_frames(
    start: Callable[..., Watched], tmp_path: Path, resource: str
) -> None:
    out = tmp_path / "failed.duckdb"
    fail_at, gap_ms = 40, 10  # the failure comes at least 400 ms (4 frames) into the run
    w = start_steady(start, out, resource, gap_ms, "--fail-at", str(fail_at))
    _, stderr = w.proc.communicate(timeout=60)
    assert w.proc.returncode == 1, stderr
    assert "'work'" in stderr
    assert "ZeroDivisionError" in stderr
    assert f"steady.py:{failure_line()}" in stderr
    assert "Traceback" not in stderr
    assert not w.alive_after(grace_s=2.0)

    with load(out) as run:
        assert run.status == "failed"
        assert run.error is not None
        assert "'work'" in run.error
        assert "ZeroDivisionError" in run.error
        assert f"steady.py:{failure_line()}" in run.error
        assert run.duration_ns is not None
        assert run.duration_ns >= fail_at * gap_ms * 1_000_000
        numbers = check_frames_cover_the_run(run)
        assert len(numbers) >= fail_at * gap_ms * 1_000_000 // FRAME_NS
    # The monitor, and for a process stage its process: all seen, all gone (checked above).
    assert len(w.seen) >= (2 if resource == "process" else 1), w.seen


# -- Ctrl-C ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_sigint_to_the_process_group_interrupts_and_finishes_the_file(
    start: Callable[..., Watched], tmp_path: Path, resource: str
) -> None:
    out = tmp_path / "interrupted.duckdb"
    w = start_steady(start, out, resource)
    printed = wait_for_frames(w, 3)
    expected_children = 2 if resource == "process" else 1  # the monitor (+ the stage process)
    deadline = time.monotonic() + 5
    while len(w.seen) < expected_children and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(w.seen) >= expected_children, w.seen
    os.killpg(w.proc.pid, signal.SIGINT)
    stdout, stderr = w.proc.communicate(timeout=60)
    assert w.proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert "Traceback" not in stderr
    assert not w.alive_after(grace_s=2.0)

    shown = sum(1 for line in [*printed, *stdout.splitlines()] if FRAME_LINE.match(line))
    with load(out) as run:
        assert run.status == "interrupted"
        assert run.error is not None
        assert "SIGINT" in run.error or "interrupted" in run.error
        numbers = check_frames_cover_the_run(run)
        assert len(numbers) >= max(shown, 3)


# -- the application is killed --------------------------------------------------------------------


def test_sigkill_of_the_cli_alone_lets_the_monitor_finish_the_file(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    out = tmp_path / "killed.duckdb"
    w = start_steady(start, out, "process")
    wait_for_frames(w, 3)
    deadline = time.monotonic() + 5
    while len(w.seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    monitor = w.monitor()
    stages = [p for p in w.seen.values() if p.pid != monitor.pid]
    assert stages, "the stage process was never seen"
    os.kill(w.proc.pid, signal.SIGKILL)  # the CLI only: not its process group
    assert w.proc.wait(timeout=10) == -signal.SIGKILL

    # Stage processes die with their parent; the monitor finishes the file and exits.
    _, alive = psutil.wait_procs([monitor, *stages], timeout=20)
    assert not alive, f"still running after the application was killed: {alive}"
    assert not w.alive_after(grace_s=2.0)
    _, stderr = w.proc.communicate(timeout=10)  # the children held the pipes until now
    assert "Traceback" not in stderr, stderr

    with load(out) as run:
        assert run.status == "failed"
        assert run.error is not None
        assert "application" in run.error
        assert "ended" in run.error
        numbers = check_frames_cover_the_run(run)
        assert len(numbers) >= 3


# -- the monitor dies, or two runs want one file --------------------------------------------------


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_a_killed_monitor_stops_the_run_and_the_file_is_finalised_as_failed(
    start: Callable[..., Watched], tmp_path: Path, resource: str
) -> None:
    """SIGKILL of the monitor process of an endless run: the application stops (the CLI exits
    by itself), says why in one line, and the file is finalised ``failed`` with the cause and
    the frames the monitor committed."""
    out = tmp_path / "blind.duckdb"
    w = start_steady(start, out, resource)
    # Frames are shown as they close and written by the monitor's writer beside that; with the
    # other core busy the writer may trail the live view by a second or more, so the kill comes
    # once 2 s of frames were shown (what the writer had not committed is what a kill loses).
    wait_for_frames(w, 20)
    w.monitor().kill()
    _, stderr = w.proc.communicate(timeout=60)  # the app never ends by itself: it was stopped
    assert w.proc.returncode == 1, stderr
    assert "Traceback" not in stderr
    said = [line for line in stderr.splitlines() if "monitor" in line]
    assert len(said) == 1 and "SIGKILL" in said[0], stderr
    assert not w.alive_after(grace_s=2.0)
    assert not (tmp_path / "blind.duckdb.lock").exists()
    with load(out) as run:
        assert run.status == "failed"
        assert run.error is not None and "SIGKILL" in run.error
        frames = run.results(0, "src -> work")
        assert len(frames) >= 1  # committed before the kill (the monitor folds every second)
        assert [f.frame for f in frames] == list(range(len(frames)))
        assert run.duration_ns == frames[-1].t_end_ns


def test_a_monitor_that_crashes_says_where_it_was(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """A fault in the monitor process (SIGSEGV, as a library it loads may raise): the run
    stops and says so in one line, and the monitor's threads' Python stacks at the fault are
    on the run's stderr, to say where it happened."""
    out = tmp_path / "crashed.duckdb"
    w = start_steady(start, out, "thread")
    wait_for_frames(w, 5)
    w.monitor().send_signal(signal.SIGSEGV)
    _, stderr = w.proc.communicate(timeout=60)
    assert w.proc.returncode == 1, stderr
    said = [line for line in stderr.splitlines() if line.startswith("streamscope:")]
    assert len(said) == 1 and "SIGSEGV" in said[0], stderr
    assert "Fatal Python error: Segmentation fault" in stderr, stderr
    assert 'File "' in stderr and "monitor" in stderr, stderr  # its frames, streamscope's
    assert not w.alive_after(grace_s=2.0)
    with load(out) as run:
        assert run.status == "failed" and run.error is not None and "SIGSEGV" in run.error


def test_a_file_left_running_by_a_killed_run_is_repaired_when_opened(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """SIGKILL of the whole run (application and monitor): nobody finishes the file. The first
    command that opens it finds its writer gone and finalises it as failed, frames kept."""
    out = tmp_path / "orphan.duckdb"
    w = start_steady(start, out, "thread")
    wait_for_frames(w, 4)
    monitor = w.monitor()
    os.killpg(w.proc.pid, signal.SIGKILL)
    w.proc.wait(timeout=10)
    psutil.wait_procs([monitor], timeout=10)
    proc = subprocess.run(
        [*cli(), "show", str(out)], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "failed" in proc.stdout
    with load(out) as run:
        assert run.status == "failed"
        assert run.error is not None and "ended without finishing" in run.error
        assert run.results(0, "src -> work")
    lock = tmp_path / "orphan.duckdb.lock"
    # (Another run starting meanwhile sweeps what this killed run left: it once took the lock
    # of the file this command had just finished, and the test saw its lock file; now it leaves
    # a finished file alone. The holder, if one is there again, says who it is.)
    assert not lock.exists(), lock.read_text()
    assert not (tmp_path / "orphan.duckdb.wal").exists()


def test_a_second_run_cannot_take_a_file_being_written(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """Two runs on one path, the second with ``--overwrite``: it is refused, naming the first
    run's process, before its application starts; the first run goes on and ends normally."""
    out = tmp_path / "shared.duckdb"
    first = start_steady(start, out, "thread")
    wait_for_frames(first, 3)
    marker = tmp_path / "second-started"
    second = start(
        str(APP), "--frame", "100ms", "--out", str(out), "--overwrite", "--",
        "--items", "20", "--marker", str(marker),
    )  # fmt: skip
    _, stderr = second.proc.communicate(timeout=60)
    assert second.proc.returncode != 0
    assert f"pid {first.proc.pid}" in stderr and "being written by another run" in stderr
    assert "Traceback" not in stderr
    assert not marker.exists()  # refused before the application started
    os.killpg(first.proc.pid, signal.SIGINT)
    first.proc.communicate(timeout=60)
    assert first.proc.returncode == 130
    with load(out) as run:
        assert run.status == "interrupted"
        assert len(check_frames_cover_the_run(run)) >= 3


def test_a_hostile_batch_drops_its_connection_and_the_run_goes_on(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """A BATCH with a probe id that fits no run file column, sent to a live monitor's socket:
    refused, the connection dropped and said so, the run goes on and ends as it would."""
    import numpy as np

    from streamscope.core.records import Kind, make_records
    from streamscope.transport.wire import MsgType, encode

    out = tmp_path / "hostile.duckdb"
    w = start_steady(start, out, "thread")
    wait_for_frames(w, 3)
    paths = [c.laddr for c in w.monitor().net_connections(kind="unix") if c.laddr]
    (path,) = {p for p in paths if p.endswith("monitor.sock")}
    rec = make_records(int(Kind.PUT), 1, np.arange(4, dtype=np.int64), np.arange(4, dtype=np.int64))
    rec["probe"][1] = 2**32 - 1
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(path)
        sock.sendall(encode(MsgType.BATCH, 99, os.getpid(), 0, rec))
        sock.settimeout(30)
        assert sock.recv(1) == b""  # the monitor hung up on it
    printed = wait_for_frames(w, 3)  # and goes on reducing the run
    assert printed
    os.killpg(w.proc.pid, signal.SIGINT)
    _, stderr = w.proc.communicate(timeout=60)
    assert w.proc.returncode == 130, stderr
    assert "dropped a connection" in stderr and "probe id 4294967295" in stderr
    assert "Traceback" not in stderr
    with load(out) as run:
        assert run.status == "interrupted"
        assert len(check_frames_cover_the_run(run)) >= 6


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_a_hung_stage_is_said_live_becomes_a_finding_and_the_timeout_ends_the_run(
    start: Callable[..., Watched], tmp_path: Path, resource: str
) -> None:
    """``work`` never returns from item 20: the live view says it stalled, ``--timeout`` ends
    the run as interrupted with the reason, and the findings name the stall (only it: the
    stages stopped with it are not)."""
    from streamscope.analysis.findings import findings

    out = tmp_path / "hung.duckdb"
    w = start(
        str(APP), "--frame", "100ms", "--out", str(out), "--stall", "500ms", "--timeout", "3s",
        "--", "--items", "0", "--gap-ms", "5", "--work-resource", resource, "--hang-at", "20",
    )  # fmt: skip
    stdout, stderr = w.proc.communicate(timeout=60)
    assert w.proc.returncode == 130, stderr
    assert "time limit of 3 s" in stderr and "Traceback" not in stderr
    notes = [line for line in stdout.splitlines() if line.startswith("[note]")]
    assert any("stage 'work' has been busy for" in n for n in notes), stdout[-2000:]
    assert not any("'src'" in n or "'sink'" in n for n in notes), notes
    assert not w.alive_after(grace_s=2.0)
    with load(out) as run:
        assert run.status == "interrupted" and "time limit" in (run.error or "")
        stalls = run.table("stall")
        assert stalls["stage"].tolist() == ["work"] and stalls["ongoing"].tolist() == [True]
        (found,) = [f for f in findings(run) if f.kind == "stall"]
        assert found.target == "work" and found.evidence["seconds"] >= 2.0
        check_frames_cover_the_run(run)


# -- tap buffers overflow -------------------------------------------------------------------------

#: Records per tap between two flushes for the small-buffer runs (a power of two, as rings need).
SMALL_CAPACITY = 256
CHANNEL_CAPACITY = 8
OVERFLOW_QUERY = (
    f"occupancy(src -> sink): mean, min, max, histogram(bins=0..{CHANNEL_CAPACITY}) every 100ms"
)


#: Totals the small-buffer run must get exactly right, refused records included.
TOTAL_QUERIES = ("count(src -> sink): sum every 100ms", "throughput(src -> sink): mean every 100ms")


@dataclass
class Counted:
    """What really happened in an overflow run, counted by the application itself."""

    items: int
    puts: int = 0
    gets: int = 0


def flood(counted: Counted, spin: int) -> ss.Pipeline:
    """``src -> sink`` as fast as Python goes; ``spin`` slows the source so the channel is often
    empty and the sink waits (a flush then often falls between an insertion and its removal)."""

    def src():  # type: ignore[no-untyped-def]
        for k in range(counted.items):
            for _ in range(spin):
                pass
            yield k
            counted.puts += 1  # the runner resumes the source once the insertion is done

    def sink(item: int) -> None:
        counted.gets += 1

    p = ss.Pipeline("flood")
    p.add("src", src)
    p.add("sink", sink)
    p.connect("src", "sink", capacity=CHANNEL_CAPACITY)
    return p


def drops_by_end(run: Run) -> dict[str, tuple[int, int]]:
    """(dropped, recorded) over the whole run, by probe kind (tail, head)."""
    kinds = {p.id: p.kind for p in run.topology.probes}
    out: dict[str, tuple[int, int]] = {}
    for d in run.drops():
        dropped, recorded = out.get(kinds[d.probe_id], (0, 0))
        out[kinds[d.probe_id]] = (dropped + d.dropped, recorded + d.recorded)
    return out


@pytest.fixture(scope="module")
def small_taps_run() -> Iterator[tuple[Run, Counted]]:
    """One inline run whose tap buffers overflow between almost every pair of flushes."""
    counted = Counted(items=60_000)
    result = run(
        flood(counted, spin=20),
        [OVERFLOW_QUERY, *TOTAL_QUERIES],
        RunOptions(frame_ns=FRAME_NS, mode="inline", tap_capacity=SMALL_CAPACITY),
    )
    assert result.status == "completed", result.error
    assert isinstance(result.store, InMemoryStore)
    with Run.from_memory(result.store) as r:
        yield r, counted


def test_overflowing_taps_count_every_refused_record(small_taps_run: tuple[Run, Counted]) -> None:
    run, counted = small_taps_run
    assert run.status == "completed"
    assert counted.puts == counted.gets == counted.items
    by_end = drops_by_end(run)
    # the stages' trackers are always on, and so is each process's stack sampler
    assert set(by_end) == {"tail", "head", "state", "stacks"}
    for end, really in (("tail", counted.puts), ("head", counted.gets)):
        dropped, recorded = by_end[end]
        assert dropped > 0, f"{end}: nothing dropped; the test did not overflow the taps"
        assert dropped + recorded == really, (end, dropped, recorded, really)
    assert all(d.dropped >= 0 and d.recorded >= 0 for d in run.drops())


def test_totals_count_every_item_when_records_are_refused(
    small_taps_run: tuple[Run, Counted],
) -> None:
    """``count`` and ``throughput`` account for every insertion and removal, the refused ones
    after the last kept record included: the application's own counts are the truth."""
    run, counted = small_taps_run
    inserted = removed = 0.0
    for f in run.results(1, "src -> sink"):
        sums = [p.value for p in f.points if isinstance(p, ScalarPoint) and p.stat == "sum"]
        inserted += sums[0] if sums and sums[0] is not None else 0.0
    for f in run.results(2, "src -> sink"):
        mean = [p.value for p in f.points if isinstance(p, ScalarPoint) and p.stat == "mean"]
        rate = mean[0] if mean and mean[0] is not None else 0.0
        removed += rate * f.covered_ns / 1e9
    assert inserted == counted.puts
    assert round(removed) == counted.gets


def test_occupancy_stays_within_the_channel_when_records_are_dropped(
    small_taps_run: tuple[Run, Counted],
) -> None:
    run, _ = small_taps_run
    frames = run.results(0, "src -> sink")
    assert frames
    bad = []
    for f in frames:
        for p in f.points:
            if isinstance(p, ScalarPoint) and p.value is not None:
                if not 0 <= p.value <= CHANNEL_CAPACITY:
                    bad.append((f.frame, p.stat, p.value))
            elif isinstance(p, HistogramPoint) and (p.under or p.over):
                bad.append((f.frame, "histogram under/over", (p.under, p.over)))
    assert not bad, f"occupancy outside [0, {CHANNEL_CAPACITY}] in frames: {bad}"


def test_a_monitor_paused_for_two_seconds_costs_the_application_only_counted_refusals(
    tmp_path: Path,
) -> None:
    """SIGSTOP the monitor process mid-run: the stages go on as fast as before (they never wait
    for it), the rings fill and refuse, every refusal is counted, and the run ends normally."""
    capacity = 4096
    stop = threading.Event()
    counted = Counted(items=0)

    def src():  # type: ignore[no-untyped-def]
        k = 0
        while not stop.is_set():
            yield k
            k += 1
            counted.puts += 1

    def sink(item: int) -> None:
        counted.gets += 1

    p = ss.Pipeline("flood")
    p.add("src", src)
    p.add("sink", sink)
    p.connect("src", "sink", capacity=CHANNEL_CAPACITY)
    out = tmp_path / "paused.duckdb"
    results: list[ss.RunResult] = []
    draining = threading.Event()  # the monitor is past its start-up and reducing frames
    opts = RunOptions(frame_ns=FRAME_NS, out=out, tap_capacity=capacity)
    worker = threading.Thread(
        target=lambda: results.append(
            run(p, [OVERFLOW_QUERY], opts, on_lag=lambda _lag: draining.set())
        )
    )
    worker.start()
    try:
        monitor = None
        while monitor is None and worker.is_alive():
            for child in psutil.Process().children(recursive=True):
                if is_monitor(child):
                    monitor = child
            time.sleep(0.01)
        assert monitor is not None
        # Pause a monitor that runs (on a busy machine its start-up may take longer than the
        # rings take to fill): only then does the pause show as its lag.
        while not draining.is_set() and worker.is_alive():
            time.sleep(0.01)
        while counted.puts < 10 * capacity:
            time.sleep(0.01)
        monitor.suspend()
        try:
            before = counted.puts
            time.sleep(2.0)
            during = counted.puts - before
        finally:
            monitor.resume()
        time.sleep(0.3)
    finally:
        stop.set()
        worker.join(timeout=60)
    assert results and results[0].status == "completed", results and results[0].error
    # The application never waited for the paused monitor: it went on inserting, more than a
    # whole ring's worth, so the rings had to refuse.
    assert during > capacity
    assert counted.puts == counted.gets == counted.items + counted.puts
    with load(out) as r:
        by_end = drops_by_end(r)
        for end in ("tail", "head"):
            dropped, recorded = by_end[end]
            assert dropped > 0, end
            assert dropped + recorded == counted.puts, (end, dropped, recorded)
        lag = r.sql("SELECT max(lag_ns) FROM monitor")[1][0][0]
        assert lag >= 1_000_000_000  # the pause shows as the monitor's lag


@pytest.mark.parametrize("resource", ["thread", "process"])
def test_a_stage_busy_finishing_items_without_ever_waiting_is_not_a_stall(
    tmp_path: Path, resource: str
) -> None:
    """A stage that never waits (its input always holds an item, its output always has room)
    changes no state for far longer than the stall limit, but finishes items all the while:
    it restates that it is busy, so no stall is said or kept."""
    import streamscope as ss
    from streamscope.analysis.findings import findings

    def spin(x: int) -> int:
        t = time.perf_counter()
        while time.perf_counter() - t < 0.0002:
            pass
        return x

    p = ss.Pipeline("busy")
    p.add("src", range(8000))
    p.add("work", spin, resource=resource)
    p.add("sink", lambda x: None)
    p.connect("src", "work", capacity=8000)  # the source puts everything at once
    p.connect("work", "sink", capacity=8000)
    out = tmp_path / "busy.duckdb"
    opts = ss.RunOptions(out=out, mode="inline", stall_ns=300_000_000, frame_ns=100_000_000)
    res = ss.run(p, ["state(work): duty", "occupancy(src -> work): min"], opts)
    assert res.status == "completed", res.error
    with load(out) as run:
        assert (run.duration_ns or 0) > 1_000_000_000  # several stall limits long
        assert run.table("stall")["stage"].tolist() == []
        assert not [f for f in findings(run) if f.kind == "stall"]
        duty = {
            f.frame: dict(zip(d.labels, d.fractions, strict=True))
            for f in run.results(0, "work") if (d := f.point("duty")) is not None
        }  # fmt: skip
        fed = [f.frame for f in run.results(1, "src -> work")
               if (m := f.point("min")) is not None and m.value is not None and m.value >= 1]  # fmt: skip
    # It never waited where its input never ran dry (its output always had room): busy all of
    # those frames. (Beside busy cores its source's thread may fall behind it for a while: the
    # frames where the input ran dry are the source's doing, not the stage's.)
    assert fed, duty
    assert all(duty[f]["busy"] >= 0.99 for f in fed if f in duty), [duty[f] for f in fed]
    assert all(d["blocked_out"] == 0 for d in duty.values()), duty


def test_an_error_of_streamscope_s_own_mid_run_is_the_run_s_recorded_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not a stage's error: the runner itself raises while it supervises. The error reaches the
    caller, and the run file says the run failed and why (not that it never started)."""
    from streamscope.pipeline.run.runner import Runner

    def broken(self: Runner, *args: object, **kwargs: object) -> object:
        raise RuntimeError("the supervisor broke")

    monkeypatch.setattr(Runner, "wait", broken)
    p = ss.Pipeline("p")
    p.add("src", range(50))
    p.add("sink", lambda x: None)
    p.connect("src", "sink", capacity=4)
    out = tmp_path / "broken.duckdb"
    with pytest.raises(RuntimeError, match="the supervisor broke"):
        run(p, [], RunOptions(out=out, mode="inline"))
    with load(out) as r:
        assert r.status == "failed"
        assert r.error is not None and "the supervisor broke" in r.error
