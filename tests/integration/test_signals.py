"""Signals as Python gives them: Ctrl-C, SIGTERM and SIGKILL to ``streamscope run``.

Each run is a real ``streamscope run`` in a session of its own, signalled as a terminal or a
supervisor signals it (its whole process group) or as ``kill PID`` does (the command alone); the
program is run plainly the same way first, and the watched one must end as it did: the same
output, the same traceback, the same status, its own handlers run once. The run file says
``interrupted`` and names the signal, and nothing of the run is left behind; what a run killed
outright leaves, the next run cleans.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import pytest

import streamscope as ss
from streamscope.store.lock import WRITER_GONE, lock_path
from watched import Watched, cli, start_steady, wait_for_frames

#: The longest a signalled run may take to end before the test fails (a hang, not a figure).
CAP_S = 60

#: A program whose main thread is stuck joining a thread that never ends; that thread says
#: ``ready`` once the main thread waits in the join.
STUCK_IN_JOIN = (
    "import queue, sys, threading, time\n"
    "q = queue.Queue()\n"
    "threading.Thread(target=lambda: [q.get() for _ in range(3)], daemon=True).start()\n"
    "for i in range(3): q.put(i)\n"
    "def forever():\n"
    "    main = threading.main_thread().ident\n"
    "    while sys._current_frames()[main].f_code.co_name != '_wait_for_tstate_lock':\n"
    "        time.sleep(0.01)\n"
    "    print('ready', flush=True)\n"
    "    time.sleep(600)\n"
    "t = threading.Thread(target=forever, daemon=True)\n"
    "t.start()\n"
    "t.join()\n"
)

HANDLES = (
    "import signal, sys, threading, time\n"
    "def stop(sig, frame):\n"
    "    print('handled', signal.Signals(sig).name, flush=True)\n"
    "    sys.exit(3)\n"
    "signal.signal(signal.SIGINT, stop)\n"
    "signal.signal(signal.SIGTERM, stop)\n"
) + STUCK_IN_JOIN


def _signalled(cmd: list[str], sig: int, to: str) -> tuple[int, str, str, float]:
    """Run ``cmd`` in a session of its own; once it printed ``ready``, send ``sig`` to its
    whole process group (``to="group"``, as a terminal does) or to its first process alone.
    Returns its status, stdout, stderr and the seconds from the signal to its end."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
        assert first == "ready\n", first + (proc.stderr.read() if proc.stderr else "")
        t0 = time.monotonic()
        (os.killpg if to == "group" else os.kill)(proc.pid, sig)
        out, err = proc.communicate(timeout=CAP_S)
        return proc.returncode, first + out, err, time.monotonic() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _watched(prog: Path, out: Path) -> list[str]:
    return [*cli(), "run", str(prog), "-o", str(out), "--quiet"]


@pytest.mark.parametrize("to", ["group", "streamscope"])
def test_ctrl_c_ends_a_program_stuck_in_a_join_as_plain_python_ends_it(
    tmp_path: Path, to: str
) -> None:
    """One Ctrl-C (SIGINT to the process group, or to ``streamscope run`` alone): the program's
    main thread leaves its join with the same traceback as under plain Python, and both end
    killed by SIGINT (a shell's 130); the run is interrupted, SIGINT named."""
    prog = tmp_path / "stuck.py"
    prog.write_text(STUCK_IN_JOIN)
    plain_rc, plain_out, plain_err, _ = _signalled([sys.executable, str(prog)], signal.SIGINT, to)
    assert plain_rc == -signal.SIGINT and plain_err.startswith("Traceback"), plain_err
    out = tmp_path / "run.duckdb"
    rc, stdout, stderr, took_s = _signalled(_watched(prog, out), signal.SIGINT, to)
    print(f"Ctrl-C to {to}: streamscope run ended {took_s:.2f} s after it")
    assert rc == plain_rc, stderr[-3000:]
    assert stdout == plain_out
    assert stderr.startswith(plain_err), stderr[-3000:]  # then streamscope's summary
    with ss.load(out) as run:
        assert run.status == "interrupted"
        assert run.error == "interrupted by SIGINT"
        assert "main -> <lambda>:3" in {c.name for c in run.topology.channels}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_programs_own_handler_runs_once_and_its_status_is_its_own(
    tmp_path: Path, sig: signal.Signals
) -> None:
    """The signal sent to the whole process group (a terminal's Ctrl-C, a supervisor's
    SIGTERM) reaches the program once, as under plain Python: its handler runs once and its
    exit status is the command's; the monitor lives through it and the run is interrupted,
    the signal named."""
    prog = tmp_path / "handles.py"
    prog.write_text(HANDLES)
    plain = _signalled([sys.executable, str(prog)], sig, "group")
    assert plain[:2] == (3, f"ready\nhandled {sig.name}\n"), plain[2]
    out = tmp_path / "run.duckdb"
    rc, stdout, stderr, _ = _signalled(_watched(prog, out), sig, "group")
    assert (rc, stdout) == plain[:2], stderr[-3000:]
    with ss.load(out) as run:
        assert run.status == "interrupted"
        assert run.error == f"interrupted by {sig.name}; handles then exited with status 3"


@pytest.mark.parametrize("to", ["group", "streamscope"])
def test_sigterm_interrupts_an_app_and_is_named(
    start: Callable[..., Watched], tmp_path: Path, to: str
) -> None:
    """SIGTERM to a pipeline app's run, to its process group or to the command alone: 130,
    the run interrupted by SIGTERM (not SIGINT), its file finished, nothing left running."""
    out = tmp_path / "app.duckdb"
    w = start_steady(start, out, "thread")
    wait_for_frames(w, 3)
    (os.killpg if to == "group" else os.kill)(w.proc.pid, signal.SIGTERM)
    _, stderr = w.proc.communicate(timeout=CAP_S)
    assert w.proc.returncode == 130, stderr
    assert "interrupted by SIGTERM" in stderr and "Traceback" not in stderr
    assert not w.alive_after(grace_s=2.0)
    with ss.load(out) as run:
        assert (run.status, run.error) == ("interrupted", "interrupted by SIGTERM")


def _ring_root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


def test_what_a_run_killed_outright_left_is_cleaned_by_the_next(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """SIGKILL of the whole run (command, monitor and program): nothing can clean up, so its
    directory of rings and its run file's lock are left. The next ``streamscope run`` (of
    another program, into another file) removes the directory at once and finishes the file
    as failed, its lock file gone."""
    prog = tmp_path / "stuck.py"
    prog.write_text(STUCK_IN_JOIN)
    killed = tmp_path / "killed.duckdb"
    w = start(str(prog), "-o", str(killed), "--frame", "100ms")
    assert w.proc.stdout is not None and w.proc.stdout.readline() == "ready\n"
    assert w.proc.stderr is not None
    for line in w.proc.stderr:  # streamscope's live frames: each in the run file once shown
        if line.startswith("["):
            break
    os.killpg(w.proc.pid, signal.SIGKILL)
    w.proc.wait(timeout=CAP_S)
    assert not w.alive_after(grace_s=5.0)
    (left,) = _ring_root().glob(f"streamscope-{w.proc.pid}-*")
    assert lock_path(killed).exists()

    quick = tmp_path / "quick.py"
    quick.write_text("print('done')\n")
    proc = subprocess.run(
        [*cli(), "run", str(quick), "-o", str(tmp_path / "next.duckdb"), "--quiet"],
        capture_output=True, text=True, timeout=CAP_S, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not left.exists()
    assert not lock_path(killed).exists()
    with contextlib.closing(duckdb.connect(str(killed), read_only=True)) as con:
        assert con.execute("SELECT status, error FROM run").fetchall() == [("failed", WRITER_GONE)]


def test_sigkill_of_streamscope_alone_kills_the_program_with_it(
    start: Callable[..., Watched], tmp_path: Path
) -> None:
    """``kill -9`` of ``streamscope run`` is ``kill -9`` of the program it runs: the program
    does not run on unwatched; the monitor finishes the run file, and removes the directory."""
    prog = tmp_path / "stuck.py"
    prog.write_text(STUCK_IN_JOIN)
    out = tmp_path / "run.duckdb"
    w = start(str(prog), "-o", str(out), "--quiet")
    assert w.proc.stdout is not None and w.proc.stdout.readline() == "ready\n"
    os.kill(w.proc.pid, signal.SIGKILL)
    w.proc.wait(timeout=CAP_S)
    assert not w.alive_after(grace_s=20.0)
    assert not list(_ring_root().glob(f"streamscope-{w.proc.pid}-*"))
    with ss.load(out) as run:
        assert run.status == "failed"
        assert "ended without finishing" in (run.error or "")
