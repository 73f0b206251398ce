"""A run's start cut short: its monitor killed as it starts, Ctrl-C or SIGTERM at any moment of
the first seconds. Each ends as docs/cli.md says, whatever the moment.

Every try is a real ``streamscope run`` in a session of its own, of the smallest program (a plain
one that prints ``started`` and waits) or app (three stages passing a few items a second), and
the tries run eight at a time. The moments are drawn (seeded) after events the test sees of the
run itself, so that every step of the start is hit whatever the machine's load: the command's
process made (the interpreter's start, its imports, before the monitor is forked), its monitor
process there (the monitor's start, while the command loads the app and compiles the queries),
the run file made (the monitor has the run: the program is started, or the pipeline), and
the run's first output (its first frames).
"""

from __future__ import annotations

import collections
import contextlib
import functools
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import streamscope as ss
from streamscope.core.process import SignalInterrupt, interruption
from streamscope.monitor import PROCESS_NAME
from watched import cli

#: The longest a try may take to end before the test fails (a hang, not a figure).
CAP_S = 120
#: Tries at once.
AT_ONCE = 8

PROGRAM = "import time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)\n"
#: A program that ends once its stdin gives a line (the test says when).
RELEASED = "import sys\nprint('started', flush=True)\nsys.stdin.readline()\n"
APP = (
    "import time\n"
    "import streamscope as ss\n\n"
    "def src():\n"
    "    i = 0\n"
    "    while True:\n"
    "        time.sleep(0.01)\n"
    "        yield i\n"
    "        i += 1\n\n"
    "def pipeline(argv):\n"
    "    p = ss.Pipeline('tiny')\n"
    "    p.add('src', src)\n"
    "    p.add('work', lambda x: x)\n"
    "    p.add('sink', lambda x: None)\n"
    "    p.chain('src', 'work', 'sink', capacity=4)\n"
    "    return p\n"
)


def _children(pid: int) -> list[int]:
    """The processes ``pid``'s main thread started (the monitor, the program)."""
    with contextlib.suppress(OSError, ValueError):
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    return []


def _is_monitor(pid: int) -> bool:
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/comm").read_text().strip() == PROCESS_NAME:
            return True  # forked from the command, ahead
        return b"streamscope.monitor" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _is_program(pid: int) -> bool:
    with contextlib.suppress(OSError):
        return b"program.auto.asmain" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return False


def _dead(pid: int) -> bool:
    """Gone, or a zombie (killed, not reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2] == "Z"


def _catches_sigterm(pid: int) -> bool:
    """Whether ``pid`` has a handler of SIGTERM (``streamscope run`` installs its handlers as its
    own code starts; before that, its interpreter's start ends on a signal as Python's does)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
    return False


@dataclass
class Try:
    """One ``streamscope run`` of ``kind`` (``program``, ``released`` or ``app``) in a session
    of its own, into ``out``."""

    kind: str
    out: Path
    proc: subprocess.Popen[str] = field(init=False)
    stdout: list[str] = field(default_factory=list)
    output: threading.Event = field(default_factory=threading.Event)
    stderr: str = ""
    _reading: threading.Thread = field(init=False)

    def start(self, tmp: Path, command: list[str] | None = None) -> None:
        """``command``: what runs ``streamscope`` (its script unless given)."""
        script = tmp / {"app": "tiny_app.py", "program": "waits.py"}.get(self.kind, "released.py")
        args = ["--frame", "100ms"] if self.kind == "app" else ["--quiet"]
        self.proc = subprocess.Popen(
            [*(command or cli()), "run", str(script), "-o", str(self.out), *args],
            stdin=subprocess.PIPE if command or self.kind == "released" else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        self._reading = threading.Thread(target=self._read, daemon=True)
        self._reading.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.stdout.append(line)
            self.output.set()

    def wait_for(self, seen: Callable[[], bool]) -> None:
        """Until ``seen()`` (or the run ended: nothing more will come)."""
        deadline = time.monotonic() + CAP_S
        while not seen() and self.proc.poll() is None:
            assert time.monotonic() < deadline, f"{self.kind}: {''.join(self.stdout)[-2000:]}"
            time.sleep(0.005)

    def end(self) -> int:
        """Its status once it ended; every process of its session gone by then."""
        err = self.proc.stderr
        assert err is not None
        said: list[str] = []
        reading = threading.Thread(target=lambda: said.append(err.read()), daemon=True)
        reading.start()
        rc = self.proc.wait(timeout=CAP_S)
        deadline = time.monotonic() + CAP_S
        while time.monotonic() < deadline:  # (a monitor ends once it finished the file)
            try:
                os.killpg(self.proc.pid, 0)
            except ProcessLookupError:
                reading.join(CAP_S)
                self._reading.join(CAP_S)
                self.stderr = "".join(said)
                return rc
            time.sleep(0.02)
        raise AssertionError(f"processes of the run outlived it: {''.join(self.stdout)}")

    def run(self) -> ss.Run | None:
        return ss.load(self.out) if self.out.exists() else None

    def kill(self) -> None:
        """Whatever is left of it (nothing where it never started: another try failed)."""
        with contextlib.suppress(ProcessLookupError, AttributeError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "waits.py").write_text(PROGRAM)
    (tmp_path / "released.py").write_text(RELEASED)
    (tmp_path / "tiny_app.py").write_text(APP)
    return tmp_path


def _all_at_once(tries: list[tuple[Try, Callable[[], str]]]) -> list[str]:
    """Each try's check, ``AT_ONCE`` at a time; what each returned. Whatever is left of them
    is killed after."""
    try:
        with ThreadPoolExecutor(AT_ONCE) as pool:
            return list(pool.map(lambda t: t[1](), tries))
    finally:
        for t, _ in tries:
            t.kill()


# -- the monitor killed as it starts ---------------------------------------------------------------


def _kill_monitors(t: Try, after_s: float) -> str:
    """Kill each monitor process of the run ``after_s`` after it is seen (the one started ahead,
    and the one started in its place when that one died before it was handed the run); a
    program is let end once the run's monitor is dead. Returns how the run said it ended."""
    t.start(t.out.parent)
    seen: dict[int, float] = {}
    killed: set[int] = set()
    released = t.kind != "released"
    deadline = time.monotonic() + CAP_S
    while t.proc.poll() is None:
        now = time.monotonic()
        assert now < deadline, f"{t.kind} {after_s}: {sorted(seen)} seen, {sorted(killed)} killed"
        kids = _children(t.proc.pid)
        for pid in kids:
            if pid not in seen and _is_monitor(pid):
                seen[pid] = now
        for pid, at in seen.items():
            if pid not in killed and now - at >= after_s:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                killed.add(pid)
        # The program starts once the run's monitor has the run: that one is seen (and
        # killed, dead) by then.
        there = not released and any(map(_is_program, kids))
        if there and killed == set(seen) and all(map(_dead, killed)):
            assert t.proc.stdin is not None
            t.proc.stdin.write("\n")
            t.proc.stdin.close()
            released = True
        time.sleep(0.005)
    rc = t.end()
    assert killed, t.stderr[-2000:]
    assert rc == 1, t.stderr[-3000:]
    assert "Traceback" not in t.stderr
    said = [line for line in t.stderr.splitlines() if line.startswith("streamscope: run failed")]
    assert len(said) == 1, t.stderr[-3000:]
    assert said[0].startswith("streamscope: run failed: the monitor process was killed (SIGKILL)")
    run = t.run()
    assert run is not None, t.stderr[-2000:]
    with run:
        assert run.status == "failed"
        assert run.error == f"the run stopped: {said[0].split(': ', 2)[2]}"
    shown = subprocess.run([*cli(), "show", str(t.out)], capture_output=True, text=True,
                           timeout=CAP_S, check=False)  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    assert "status=failed" in shown.stdout and "killed (SIGKILL)" in shown.stdout
    return str(run.error)


#: The runs whose monitor is killed, and when (s after it is there): a program that ends when
#: told, once its monitor is dead, and an app that never ends, which the run stops.
KILLS = (("released", 0.0), ("app", 0.0), ("released", 0.05), ("app", 0.2), ("released", 1.0))


def test_a_monitor_killed_as_it_starts_leaves_a_failed_run_that_says_so(scripts: Path) -> None:
    """SIGKILL of the monitor 0, 50, 200 ms and 1 s after it is there (0: before it could open
    anything, most often; the one started in place of a monitor started ahead and killed before
    it had the run is killed too): the command says in one line that the monitor was killed,
    exits 1, and leaves a run file that ``show`` reads: failed, and why."""
    tries = []
    for kind, after_s in KILLS:
        t = Try(kind, scripts / f"{kind}-{after_s}.duckdb")
        tries.append((t, functools.partial(_kill_monitors, t, after_s)))
    print(*_all_at_once(tries), sep="\n")  # how far each got: "... while it started" or later


# -- Ctrl-C and SIGTERM at any moment of the start ------------------------------------------------


#: What the moments are drawn after, each with the longest it is drawn within (s).
MOMENTS = (
    ("made", 0.4),  # the interpreter's start, the command's imports, before the monitor
    ("monitor", 0.4),  # the monitor's start; the command loads the app, compiles the queries
    ("file", 0.05),  # the monitor has the run: the program starts, or the pipeline
    ("output", 0.3),  # its first frames
    ("made", 2.0),  # anywhere in the first two seconds
)


def _signal_at(t: Try, sig: signal.Signals, to: str, moment: str, delay_s: float) -> str:
    """Send ``sig`` to the run's session (``to="group"``, as a terminal or a supervisor does) or
    to the command alone, ``delay_s`` after the event ``moment``; check that it ended as
    documented; returns which ending it was."""
    t.start(t.out.parent)
    if moment == "monitor":
        t.wait_for(lambda: any(map(_is_monitor, _children(t.proc.pid))))
    elif moment == "file":
        t.wait_for(t.out.exists)  # made once the monitor has the run
    elif moment == "output":
        t.wait_for(t.output.is_set)
    time.sleep(delay_s)
    ours = _catches_sigterm(t.proc.pid)
    with contextlib.suppress(ProcessLookupError):
        (os.killpg if to == "group" else os.kill)(t.proc.pid, sig)
    rc = t.end()
    return _ended_as_documented(t, sig, rc, ours)


def _ended_as_documented(t: Try, sig: signal.Signals, rc: int, ours: bool) -> str:
    why = interruption(SignalInterrupt(sig))  # as the command words it
    last = t.stderr.strip().splitlines()[-1] if t.stderr.strip() else ""
    run = t.run()
    if run is None:
        # Before the run started: nothing written; before streamscope's own code ran (its
        # handlers not there yet), as Python ends on the signal (killed by it, or its
        # KeyboardInterrupt said, in its own start with status 1).
        if not ours:
            return "python's start"
        assert rc == 130, t.stderr[-3000:]
        assert last == f"streamscope: error: {why} before the run started: no run file was written"
        assert "Traceback" not in t.stderr
        return "before the run"
    with run:
        status, error = run.status, run.error
    assert ours, t.stderr[-3000:]
    assert status == "interrupted" and error is not None, (status, error, t.stderr[-3000:])
    if t.kind == "app" or sig != signal.SIGINT or not error.startswith("interrupted by SIGINT"):
        # (where a program got Ctrl-C, its interpreter says its KeyboardInterrupt, as plainly)
        assert "Traceback" not in t.stderr, t.stderr[-3000:]
    if last.startswith("streamscope: error: "):  # it ended on the signal as the run started
        assert (rc, error) == (130, why), t.stderr[-3000:]
        assert last == f"streamscope: error: {why}; the run file {t.out} says how the run ended"
        return "as the run started"
    assert f"streamscope: run interrupted: {error}" in t.stderr, t.stderr[-3000:]
    if t.kind == "app":
        assert (rc, error) == (130, why)
        return "the pipeline's run"
    if error.endswith(" before the program started"):
        assert (rc, error) == (130, f"interrupted by {sig.name} before the program started")
        assert not t.stdout
        return "before the program"
    # The program got it, and ended as it does on it: the command ends as the program did.
    assert error.startswith(f"interrupted by {sig.name}"), error
    then = error.removeprefix(f"interrupted by {sig.name}")
    if then == "":
        assert rc == -sig
    elif "then was killed by " in then:
        assert rc == -signal.Signals[then.rsplit(" ", 1)[1]]
    else:
        assert rc == int(then.rsplit(" ", 1)[1]), (rc, error)
    return "the program's run"


#: The environment variable that sets how many tries the signals' test makes: 16 in the
#: suite's time, 40 (20 SIGTERMs, 20 Ctrl-Cs: each of the eight kinds at each moment) when
#: asked, e.g. after a change to how a run starts or ends.
TRIES = "STREAMSCOPE_START_SIGNAL_TRIES"


def test_ctrl_c_or_sigterm_at_any_moment_of_the_start_ends_it_as_documented(
    scripts: Path,
) -> None:
    """SIGTERMs and Ctrl-Cs (SIGINT), to the run's process group or to the command alone, of
    a program and of an app, at moments drawn across the start (16 tries; ``TRIES`` asks for
    more): each ends as docs/cli.md says. Before the run began its file: 130, a line saying so, no file. From then
    on: the file finished as interrupted, naming the signal; 130 for an app, and for a program
    that never started; a program that got it ends as it does, and the command with it."""
    rng = random.Random(47)
    tries = []
    for i in range(int(os.environ.get(TRIES, "16"))):
        sig = (signal.SIGTERM, signal.SIGINT)[i % 2]
        kind = ("program", "app")[i // 2 % 2]
        to = ("group", "command")[i // 4 % 2]
        moment, within_s = MOMENTS[i % len(MOMENTS)]  # 40 tries: every one with each of the 8
        t = Try(kind, scripts / f"run{i}.duckdb")
        delay_s = rng.uniform(0, within_s)
        tries.append((t, functools.partial(_signal_at, t, sig, to, moment, delay_s)))
    print(collections.Counter(_all_at_once(tries)))  # which step of the start each cut short


#: ``streamscope`` paused at a step of its start, until its stdin gives a line: once it has
#: handed its monitor the run (``launched``: Ctrl-C and SIGTERM wait then), or as it is about
#: to start the program (``program``). It says ``paused`` on stderr.
PAUSED = """
import contextlib, sys
from streamscope.cli import entry
import streamscope.runtime.launch as launch
import streamscope.runtime.program as program

def pause():
    print("paused", file=sys.stderr, flush=True)
    sys.stdin.readline()

if sys.argv[1] == "launched":
    made = launch.Launched.__init__
    def init(self, *args, **kwargs):
        made(self, *args, **kwargs)
        pause()
    launch.Launched.__init__ = init
else:
    handling = program._handling
    @contextlib.contextmanager
    def paused(*args, **kwargs):
        with handling(*args, **kwargs):
            pause()
            yield
    program._handling = paused
del sys.argv[1]
entry()
"""


@pytest.mark.parametrize(
    ("kind", "step", "sig", "to", "ending"),
    [
        ("app", "launched", signal.SIGTERM, "group", "the pipeline's run"),
        ("program", "launched", signal.SIGINT, "command", "as the run started"),
        ("program", "program", signal.SIGTERM, "group", "before the program"),
    ],
    ids=["app-held", "program-held", "program-not-started"],
)
def test_a_signal_at_the_steps_between_ends_it_as_documented(
    scripts: Path, kind: str, step: str, sig: signal.Signals, to: str, ending: str
) -> None:
    """The steps too short for a drawn moment to hit often, each hit: a signal while the
    monitor is handed the run waits, then interrupts the run, its file finished; one as the
    program is about to start interrupts the run before it, the program never started."""
    t = Try(kind, scripts / "paused.duckdb")
    t.start(scripts, [sys.executable, "-c", PAUSED, step])
    assert t.proc.stderr is not None and t.proc.stdin is not None
    for line in t.proc.stderr:
        if line == "paused\n":
            break
    ours = _catches_sigterm(t.proc.pid)
    (os.killpg if to == "group" else os.kill)(t.proc.pid, sig)
    t.proc.stdin.write("\n")  # (the signal came before it: it is handled first)
    t.proc.stdin.close()
    try:
        assert _ended_as_documented(t, sig, t.end(), ours) == ending
    finally:
        t.kill()
