"""How an unmodified program's run ends under ``streamscope run``: a live manager, a time
limit, processes that outlive it, signals: each as plain Python would end it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path

import streamscope as ss
from streamscope.analysis import findings
from watched import cli


def _run_cli(
    tmp: Path, prog: Path, *extra: str, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*cli(), "run", str(prog), "-o", str(tmp / "run.duckdb"), "--quiet", *extra],
        capture_output=True, text=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_live_manager_ends_with_the_program_as_plain_python_ends_it(tmp_path: Path) -> None:
    """A ``multiprocessing.Manager`` still referenced when the program ends (pypeln's process
    stages keep one): plain Python shuts its server down at exit, and so does the watched
    program; the run ends at once and keeps its stages and channel."""
    prog = tmp_path / "managed.py"
    prog.write_text(
        "import multiprocessing as mp, queue, threading\n"
        "manager = mp.Manager()\n"
        "shared = manager.Namespace(done=0)\n"
        "q = queue.Queue(4)\n"
        "def eat():\n"
        "    while q.get() is not None: shared.done += 1\n"
        "t = threading.Thread(target=eat); t.start()\n"
        "for i in range(50): q.put(i)\n"
        "q.put(None); t.join()\n"
        "print('done', shared.done)\n"
    )
    plain = subprocess.run(
        [sys.executable, str(prog)], capture_output=True, text=True, timeout=60, check=False
    )
    proc = _run_cli(tmp_path, prog, timeout=60)
    assert proc.returncode == plain.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == plain.stdout == "done 50\n"
    with ss.load(tmp_path / "run.duckdb") as run:
        assert run.status == "completed"
        assert {c.name for c in run.topology.channels} == {"main -> eat"}


def test_a_program_that_never_ends_is_stopped_at_its_time_limit(tmp_path: Path) -> None:
    """A thread that never ends (not a daemon: plain Python would wait for it forever): the
    time limit interrupts the program as Ctrl-C would, kills it if that is not enough, and
    the run ends ``interrupted`` (exit status 130) with what it saw."""
    prog = tmp_path / "forever.py"
    prog.write_text(
        "import queue, threading, time\n"
        "q = queue.Queue(2)\n"
        "def eat():\n"
        "    while True:\n"
        "        q.get(); time.sleep(0.01)\n"
        "threading.Thread(target=eat).start()\n"
        "for i in range(20): q.put(i)\n"
        "print('fed', flush=True)\n"
    )
    proc = _run_cli(tmp_path, prog, "--timeout", "2s", timeout=60)
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert proc.stdout == "fed\n"
    with ss.load(tmp_path / "run.duckdb") as run:
        assert run.status == "interrupted"
        assert "time limit of 2 s" in (run.error or "")
        assert {s.name for s in run.topology.stages} == {"eat", "main"}


def test_processes_that_outlive_the_program_are_named_and_left_running(tmp_path: Path) -> None:
    """A child the program starts and never waits for runs on after it, as under plain
    Python; the run ends with the program and names it (at the end, in the run file and as a
    finding)."""
    prog = tmp_path / "leaves.py"
    prog.write_text(
        "import queue, subprocess, sys, threading\n"
        "q = queue.Queue(2)\n"
        "t = threading.Thread(target=lambda: [q.get() for _ in range(10)]); t.start()\n"
        "for i in range(10): q.put(i)\n"
        "t.join()\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(child.pid)\n"
    )
    proc = _run_cli(tmp_path, prog, timeout=60)
    child = int(proc.stdout)
    try:
        assert proc.returncode == 0, proc.stderr[-2000:]
        os.kill(child, 0)  # still running
        assert f"{child} (" in " ".join(proc.stderr.split())
        with ss.load(tmp_path / "run.duckdb") as run:
            assert run.status == "completed"
            ((about, text),) = run.notes()
            assert about == "outlived" and text.startswith(f"{child} (")
            assert [f for f in findings(run) if f.kind == "outlived"]
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_signal_to_streamscope_reaches_the_program_and_ends_both_as_it_ends_it(
    tmp_path: Path,
) -> None:
    """SIGTERM sent to ``streamscope run`` alone is passed on to the program, which ends as
    plain Python ends on it (killed by it); the command ends the same way and the run is
    ``interrupted``, the signal named, with what it saw."""
    prog = tmp_path / "waits.py"
    prog.write_text(
        "import queue, threading, time\n"
        "q = queue.Queue(2)\n"
        "threading.Thread(target=lambda: [q.get() for _ in range(5)], daemon=True).start()\n"
        "for i in range(5): q.put(i)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [*cli(), "run", str(prog), "-o", str(tmp_path / "run.duckdb"), "--quiet"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.stdout is not None
    assert proc.stdout.readline() == "ready\n"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM, err[-2000:]
    with ss.load(tmp_path / "run.duckdb") as run:
        assert run.status == "interrupted"
        assert "SIGTERM" in (run.error or "")
        assert "main -> <lambda>:3" in {c.name for c in run.topology.channels}


def test_a_programs_lost_records_name_the_option_that_keeps_them(tmp_path: Path) -> None:
    """A program flooding a queue past buffers of 16 records (``--tap-capacity 16``) loses
    records, and the finding says to raise ``--tap-capacity``, which ``streamscope run``
    takes; a capacity that is not a power of two is refused before anything runs."""
    prog = tmp_path / "flood.py"
    prog.write_text(
        "import queue, threading\n"
        "q = queue.Queue(8)\n"
        "def eat():\n"
        "    while q.get() is not None: pass\n"
        "t = threading.Thread(target=eat); t.start()\n"
        "for i in range(20000): q.put(i)\n"
        "q.put(None); t.join()\n"
        "print('done')\n"
    )
    proc = _run_cli(tmp_path, prog, "--tap-capacity", "16")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout == "done\n"
    with ss.load(tmp_path / "run.duckdb") as run:
        assert sum(d.dropped for d in run.drops()) > 0, "16 records a buffer did not overflow"
        drops = [f for f in findings(run) if f.kind == "drops"]
        assert drops and all("--tap-capacity" in f.suggestion for f in drops)
    bad = _run_cli(tmp_path, prog, "--tap-capacity", "100", "--overwrite")
    assert bad.returncode == 2 and bad.stdout == ""
    assert "tap capacity 100 is not a power of two" in bad.stderr, bad.stderr[-2000:]
