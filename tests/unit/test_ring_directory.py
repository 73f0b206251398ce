"""Run directories: a fresh one per run; what runs killed outright left is cleaned by the next,
and a directory any live process of its run still uses is kept."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from streamscope.core.rings import ring_directory
from streamscope.core.topology import Topology
from streamscope.pipeline.program.registry import SESSION_ENV
from streamscope.runtime.leftovers import record_run_file, sweep
from streamscope.store.lock import WRITER_GONE, WriterLock, lock_path, repair
from streamscope.store.writer import DuckDBStore, RunMeta

SLEEP = "import time; time.sleep(60)"


def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes that stand for a run's monitor or its program's processes while a test runs."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for p in started:
        p.kill()
        p.wait()


def _left(root: Path, pid: int, tag: str) -> Path:
    d = root / f"streamscope-{pid}-{tag}"
    (d / "rings").mkdir(parents=True)
    (d / "rings" / f"{pid}-0").write_bytes(b"x")
    return d


def _running_file(path: Path) -> None:
    """A run file left ``running`` by a writer that was killed, its lock file beside it."""
    meta = RunMeta("r", "killed", "prog.py", "streamscope run prog.py", (), "host", 1, 10**9, "0")
    store = DuckDBStore(path)
    store.begin(meta, Topology("killed"), ())
    store.close()
    lock_path(path).write_text("pid 1, since 2026-01-01 00:00:00\n")


def _status(path: Path) -> str:
    with contextlib.closing(duckdb.connect(str(path), read_only=True)) as con:
        row = con.execute("SELECT status, error FROM run").fetchone()
    assert row is not None
    return f"{row[0]}: {row[1]}"


def test_each_run_gets_a_fresh_directory(tmp_path: Path) -> None:
    a, b = Path(ring_directory(str(tmp_path))), Path(ring_directory(str(tmp_path)))
    try:
        assert a != b and a.is_dir() and b.is_dir()
        assert a.name.startswith(f"streamscope-{os.getpid()}-")
    finally:
        for d in (a, b):
            d.rmdir()


def test_a_run_killed_outright_is_cleaned_and_its_file_finished(tmp_path: Path) -> None:
    """Its maker gone and no process using it: the directory goes at once (no wait), its run
    file, left ``running``, is finalised as failed and its stale lock file removed."""
    out = tmp_path / "killed.duckdb"
    _running_file(out)
    left = _left(tmp_path, _dead_pid(), "deadbeef")
    record_run_file(left, out)
    assert sweep(tmp_path) == [left]
    assert not left.exists()
    assert not lock_path(out).exists()
    assert _status(out) == f"failed: {WRITER_GONE}"


def test_a_directory_any_live_process_of_its_run_uses_is_kept(
    tmp_path: Path, sleepers: list[subprocess.Popen[bytes]]
) -> None:
    """Its maker (the process running the program) is gone, but its monitor (the directory on
    its command line) or a process of the program (the session in its environment) runs on:
    kept. A live maker keeps its own, unless its number now belongs to a process started after
    the directory was last touched (then its maker is gone too)."""
    root = tmp_path
    by_monitor = _left(root, _dead_pid(), "00000001")
    by_program = _left(root, _dead_pid(), "00000002")
    unused = _left(root, _dead_pid(), "00000003")
    alive = _left(root, os.getpid(), "00000004")
    reused = _left(root, os.getpid(), "00000005")
    day_ago = time.time() - 86400
    os.utime(reused, (day_ago, day_ago))
    sleepers.append(subprocess.Popen([sys.executable, "-c", SLEEP, str(by_monitor / "config")]))
    session = {**os.environ, SESSION_ENV: f'{{"dir": "{by_program}/rings"}}'}
    sleepers.append(subprocess.Popen([sys.executable, "-c", SLEEP], env=session))
    for p in sleepers:  # their command lines and environments are in /proc once they run
        while not Path("/proc", str(p.pid), "cmdline").read_bytes():
            time.sleep(0.01)
    assert sorted(sweep(root)) == sorted([unused, reused])
    assert by_monitor.exists() and by_program.exists() and alive.exists()


def test_a_file_a_live_run_writes_is_never_touched(tmp_path: Path) -> None:
    """A killed run's directory names a run file that a later run writes now (it holds the
    lock): the directory goes, the file and its lock stay."""
    out = tmp_path / "reused.duckdb"
    _running_file(out)
    lock = WriterLock(out).acquire()
    try:
        left = _left(tmp_path, _dead_pid(), "0badf00d")
        record_run_file(left, out)
        assert sweep(tmp_path) == [left]
        assert lock_path(out).exists()
        assert _status(out) == "running: None"
    finally:
        lock.release()


def test_a_file_finished_already_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A killed run's file that the first command to open it finished already: the sweep
    takes no lock on it (which would make its lock file again, for a moment, where that
    command had removed it: a reader then saw one there)."""
    out = tmp_path / "done.duckdb"
    _running_file(out)
    repair(out)
    assert not lock_path(out).exists()
    taken: list[Path] = []
    acquire = WriterLock.acquire

    def watched(self: WriterLock, why: str = "") -> WriterLock:
        taken.append(self.path)
        return acquire(self, why)

    monkeypatch.setattr(WriterLock, "acquire", watched)
    left = _left(tmp_path, _dead_pid(), "0ddba11")
    record_run_file(left, out)
    assert sweep(tmp_path) == [left]
    assert taken == [] and not lock_path(out).exists()
    assert _status(out) == f"failed: {WRITER_GONE}"


#: A process that repairs the run file argv[1] as a run sweeping leftovers does: it takes the
#: file's lock saying so and (argv[3] == "open") its DuckDB connection, says it is ready (argv[2]
#: appears), and finishes only once told (argv[2] is removed).
REPAIRER = """
import os, sys, time
from pathlib import Path
import duckdb
from streamscope.store.lock import REPAIRING, WriterLock, repair
out, ready = Path(sys.argv[1]), Path(sys.argv[2])
lock = WriterLock(out).acquire(REPAIRING)
con = duckdb.connect(str(out)) if sys.argv[3] == "open" else None
ready.write_text("ready")
while ready.exists():
    time.sleep(0.005)
if con is not None:
    con.close()
repair(out, holding=True)
lock.release()
"""


@pytest.mark.parametrize("holds", ["lock", "open"])
def test_a_reader_waits_for_a_repair_under_way_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, holds: str
) -> None:
    """A command opening a killed run's file while another process repairs it (a run sweeping
    what killed runs left) waits for that repair and reads the file finished: it neither says
    the file is locked by a run still going (``open``: the repairer holds its DuckDB connection)
    nor reads it as still running (``lock``: only the lock is held yet)."""
    from streamscope.store import reader

    out, ready = tmp_path / "killed.duckdb", tmp_path / "ready"
    _running_file(out)
    lock_path(out).unlink()
    repairer = subprocess.Popen([sys.executable, "-c", REPAIRER, str(out), str(ready), holds])
    try:
        while not ready.exists():
            assert repairer.poll() is None, "the repairer ended before it was ready"
            time.sleep(0.005)
        waited: list[bool] = []
        wait = reader.wait_for_repair

        def told_then_wait(path: Path) -> bool:
            ready.unlink()  # the repair goes on only once this command found it under way
            waited.append(wait(path))
            return waited[-1]

        monkeypatch.setattr(reader, "wait_for_repair", told_then_wait)
        with reader.load(out) as run:
            assert (run.status, run.error) == ("failed", WRITER_GONE)
        assert waited == [True]
    finally:
        assert repairer.wait(timeout=60) == 0
    assert not lock_path(out).exists()


def test_a_repair_by_a_command_says_so_in_the_lock_it_takes(tmp_path: Path) -> None:
    """``repair`` from a command (holding no lock) takes the file's lock, saying it repairs, so
    that another reader waits for it; the lock goes when it is done."""
    out = tmp_path / "killed.duckdb"
    _running_file(out)
    lock_path(out).unlink()
    seen: list[str] = []
    connect = duckdb.connect

    def watched(path: str, *args: object, **kwargs: object) -> duckdb.DuckDBPyConnection:
        seen.append(lock_path(out).read_text())
        return connect(path, *args, **kwargs)  # type: ignore[arg-type]

    with pytest.MonkeyPatch.context() as mp:
        from streamscope.store import duck

        mp.setattr(duck.duckdb, "connect", watched)
        assert repair(out)
    assert len(seen) == 1 and seen[0].startswith(f"pid {os.getpid()},") and "repairing" in seen[0]
    assert _status(out) == f"failed: {WRITER_GONE}"
    assert not lock_path(out).exists()
