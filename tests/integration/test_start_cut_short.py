"""A run's start cut short: its monitor killed as it starts, Ctrl-C or SIGTERM at any moment of
the first seconds. Each ends as docs/cli.md says, whatever the moment.

Every try is a real ``streamscope run`` in a session of its own, of the smallest program (a plain
one that prints ``started`` and waits) or app (three stages passing a few items a second), and
the tries run eight at a time. The moments are drawn (seeded) after events the test sees of the
run itself, so that every step of the start is hit whatever the machine's load: the command's
process made (the interpreter's start, its imports, before the monitor is forked), its monitor
process there (the monitor's start, while the command loads the app and compiles the queries),
the run file made (the monitor has the run: the program is started, or the pipeline), and
the run's first output (its first frames). Steps too short to hit so, and a signal whose
interruption is lost on its way, are hit by pausing the command there.

A try that is not over within ``BOUND_S`` fails the test at once, saying what each process of
it was doing (its threads' signals and waits, the command's Python stacks); whatever is left of
every try is killed however the test ends.
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
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest

import streamscope as ss
from streamscope.core.process import SignalInterrupt, interruption
from streamscope.monitor import PROCESS_NAME
from watched import cli

#: The longest a try may take, from its start to the end of every process of its session, before
#: the test fails (a hang, not a figure): what each of its processes was doing is said, and every
#: try still running is killed.
BOUND_S = 60
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


def _session(sid: int) -> list[int]:
    """The live processes of the session ``sid`` (a try's, whoever their parent now is)."""
    found = []
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = (entry / "stat").read_text()
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                found.append(int(entry.name))
    return sorted(found)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _threads(pid: int) -> list[str]:
    """Each thread of ``pid``: its state, its signals (blocked, caught, pending) and where it
    waits in the kernel."""
    said = []
    with contextlib.suppress(OSError):
        for task in sorted(Path(f"/proc/{pid}/task").iterdir()):
            with contextlib.suppress(OSError, KeyError):
                status = dict(
                    line.split(":\t", 1) for line in (task / "status").read_text().splitlines()
                )
                said.append(
                    f"  thread {task.name} {status['Name']} {status['State']}: blocked "
                    f"{status['SigBlk']}, caught {status['SigCgt']}, pending "
                    f"{status['SigPnd']}/{status['ShdPnd']}, in {(task / 'wchan').read_text()}"
                )
    return said


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
    of its own, into ``out``, that must be over within ``BOUND_S`` of its start."""

    kind: str
    out: Path
    proc: subprocess.Popen[str] = field(init=False)
    stdout: list[str] = field(default_factory=list)
    output: threading.Event = field(default_factory=threading.Event)
    said: list[str] = field(default_factory=list)
    #: It said ``paused`` on stderr (``PAUSED``, ``INTERRUPTED``).
    paused: threading.Event = field(default_factory=threading.Event)
    deadline: float = 0.0
    _reading: list[threading.Thread] = field(default_factory=list)

    def start(self, tmp: Path, command: list[str] | None = None) -> None:
        """``command``: what runs ``streamscope`` (its script unless given). Its interpreters
        dump their threads' stacks if killed by SIGABRT (``hung``)."""
        script = tmp / {"app": "tiny_app.py", "program": "waits.py"}.get(self.kind, "released.py")
        args = ["--frame", "100ms"] if self.kind == "app" else ["--quiet"]
        self.deadline = time.monotonic() + BOUND_S
        self.proc = subprocess.Popen(
            [*(command or cli()), "run", str(script), "-o", str(self.out), *args],
            stdin=subprocess.PIPE if command or self.kind == "released" else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
            env={**os.environ, "PYTHONFAULTHANDLER": "1"},
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stderr is not None
        for stream, lines, seen, mark in (
            (self.proc.stdout, self.stdout, self.output, None),
            (self.proc.stderr, self.said, self.paused, "paused\n"),
        ):
            reading = threading.Thread(
                target=self._read, args=(stream, lines, seen, mark), daemon=True
            )
            reading.start()
            self._reading.append(reading)

    @staticmethod
    def _read(stream: IO[str], lines: list[str], seen: threading.Event, mark: str | None) -> None:
        for line in stream:
            lines.append(line)
            if mark is None or line == mark:
                seen.set()

    @property
    def stderr(self) -> str:
        return "".join(self.said)

    def wait_for(self, seen: Callable[[], bool], what: str = "") -> None:
        """Until ``seen()`` (or the run ended: nothing more will come)."""
        self._within(lambda: seen() or self.proc.poll() is not None, what or "awaited step")

    def end(self) -> int:
        """Its status once it ended; every process of its session gone, its output read."""
        self._within(lambda: self.proc.poll() is not None, "end of the command", 0.02)
        # (a monitor ends once it finished the file)
        self._within(lambda: not _group_alive(self.proc.pid), "end of the run's processes", 0.02)
        for reading in self._reading:
            reading.join(max(self.deadline - time.monotonic(), 0))
        return self.proc.returncode

    def _within(self, done: Callable[[], bool], what: str, every_s: float = 0.005) -> None:
        """Until ``done()``, failing with what the run was doing if ``BOUND_S`` passes first."""
        while not done():
            if time.monotonic() >= self.deadline:
                raise AssertionError(f"{self.kind} {self.out.name}: {BOUND_S} s, and no {what}\n"
                                     + self.hung())  # fmt: skip
            time.sleep(every_s)

    def hung(self) -> str:
        """What each process of its session was doing (its threads' states, signals and
        waits), then, the command killed by SIGABRT, its threads' Python stacks; every
        process of it is killed."""
        said = []
        for pid in _session(self.proc.pid):
            with contextlib.suppress(OSError):
                command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                said.append(f"{pid} {command.decode(errors='replace')[:160]}")
            said.extend(_threads(pid))
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        self.kill()
        self._reading[-1].join(5)  # (the stacks come before the stream's end)
        said.append(f"stdout: {''.join(self.stdout)[-1000:]}")
        said.append(f"stderr: {self.stderr[-6000:]}")
        return "\n".join(said)

    def run(self) -> ss.Run | None:
        return ss.load(self.out) if self.out.exists() else None

    def kill(self) -> None:
        """Whatever is left of it (nothing where it never started)."""
        with contextlib.suppress(ProcessLookupError, AttributeError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@pytest.fixture(autouse=True)
def ctrl_c_as_a_terminal_sends_it() -> Iterator[None]:
    """The tries' commands get SIGINT as Ctrl-C sends it, whatever this process was started
    as: a shell starts a job in the background with it ignored, and a command keeps it so."""
    ignored = signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    if ignored:
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.fixture
def scripts(tmp_path: Path) -> Path:
    (tmp_path / "waits.py").write_text(PROGRAM)
    (tmp_path / "released.py").write_text(RELEASED)
    (tmp_path / "tiny_app.py").write_text(APP)
    return tmp_path


def _all_at_once(tries: list[tuple[Try, Callable[[], str]]]) -> list[str]:
    """Each try's check, ``AT_ONCE`` at a time; what each returned. The first to fail ends the
    test: the tries not begun are not, those running are killed. Whatever is left of every try
    is killed however the test ends."""
    pool = ThreadPoolExecutor(AT_ONCE)
    try:
        checks = [pool.submit(check) for _, check in tries]
        for done in as_completed(checks):
            if done.exception() is not None:
                for check in checks:
                    check.cancel()
                for t, _ in tries:
                    t.kill()
                done.result()
        return [check.result() for check in checks]
    finally:
        pool.shutdown(cancel_futures=True)  # (each bounded: its run ends, or is killed, by then)
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
    while t.proc.poll() is None:
        now = time.monotonic()
        if now >= t.deadline:
            raise AssertionError(f"{after_s}: {sorted(seen)} seen, {sorted(killed)} killed\n"
                                 + t.hung())  # fmt: skip
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
                           timeout=BOUND_S, check=False)  # fmt: skip
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
        t.wait_for(lambda: any(map(_is_monitor, _children(t.proc.pid))), "monitor")
    elif moment == "file":
        t.wait_for(t.out.exists, "run file")  # made once the monitor has the run
    elif moment == "output":
        t.wait_for(t.output.is_set, "output")
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


def _at_pause(t: Try, script: list[str], sig: signal.Signals, to: str) -> str:
    """Run ``streamscope`` by ``script`` (``PAUSED``, ``INTERRUPTED``), send ``sig`` to it
    (``to``: as ``_signal_at``) once it is paused, then let it go on; check that it ended as
    documented, and returns which ending it was."""
    t.start(t.out.parent, [sys.executable, "-c", *script])
    t.wait_for(t.paused.is_set, "pause")
    ours = _catches_sigterm(t.proc.pid)
    (os.killpg if to == "group" else os.kill)(t.proc.pid, sig)
    assert t.proc.stdin is not None
    with contextlib.suppress(BrokenPipeError):  # (a run that ended on it at once)
        t.proc.stdin.write("\n")  # (the signal came before it: it is handled first)
        t.proc.stdin.close()
    return _ended_as_documented(t, sig, t.end(), ours)


#: The steps between (``PAUSED``): where, what is sent to whom, and how the run must end.
BETWEEN = (
    ("app", "launched", signal.SIGTERM, "group", "the pipeline's run"),
    ("program", "launched", signal.SIGINT, "command", "as the run started"),
    ("program", "program", signal.SIGTERM, "group", "before the program"),
)


def test_a_signal_at_the_steps_between_ends_it_as_documented(scripts: Path) -> None:
    """The steps too short for a drawn moment to hit often, each hit: a signal while the
    monitor is handed the run waits, then interrupts the run, its file finished; one as the
    program is about to start interrupts the run before it, the program never started."""
    tries = []
    for i, (kind, step, sig, to, _) in enumerate(BETWEEN):
        t = Try(kind, scripts / f"paused{i}.duckdb")
        tries.append((t, functools.partial(_at_pause, t, [PAUSED, step], sig, to)))
    assert _all_at_once(tries) == [ending for *_, ending in BETWEEN]


#: ``streamscope`` whose interruption is lost on its way, paused (as ``PAUSED``) where a signal
#: interrupts it (``step``): as it prepares the run, before its monitor has it (``prepared``);
#: once the run began, before the program starts (``begun``); as a pipeline runs
#: (``running``); as it waits for the program (``waiting``). The signal comes inside a weakref's
#: callback (``dropped``: Python says what is raised there was ignored and goes on; the import
#: system lets go of each module's lock through one, after every import), inside a bare
#: ``except:`` (``caught``: a library's, or an app's own code), or to another thread than the
#: waiting one, which alone runs Python's handlers, between its instructions (``unseen``: as
#: one that comes just before it waits).
INTERRUPTED = """
import signal, sys, weakref
from streamscope.cli import entry
import streamscope.cli.running as running
import streamscope.runtime.launch as launch
import streamscope.runtime.program as program

step, how = sys.argv[1:3]
del sys.argv[1:3]

def pause():
    print("paused", file=sys.stderr, flush=True)
    sys.stdin.readline()

def lost():
    if how == "unseen":
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        print("paused", file=sys.stderr, flush=True)
    elif how == "dropped":
        class Gone:
            pass
        gone = Gone()
        ref = weakref.ref(gone, lambda ref: pause())
        del gone
    else:
        try:
            pause()
        except BaseException:
            pass

def after_lost(step):
    def paused(*args, **kwargs):
        if not seen:
            seen.append(lost())
        try:
            return step(*args, **kwargs)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})
    return paused

seen = []
if step == "prepared":
    running._query_texts = after_lost(running._query_texts)
elif step == "begun":
    program._reaping = after_lost(program._reaping)
elif step == "waiting":
    program._wait = after_lost(program._wait)
else:
    launch.Launched.failure = after_lost(launch.Launched.failure)
entry()
"""

#: Where the interruption is lost, how, what is sent to whom, and how the run must end.
LOST = (
    ("program", "prepared", "dropped", signal.SIGTERM, "command", "before the run"),
    ("program", "begun", "dropped", signal.SIGINT, "group", "before the program"),
    ("app", "prepared", "caught", signal.SIGTERM, "group", "before the run"),
    ("program", "begun", "caught", signal.SIGINT, "command", "before the program"),
    ("app", "running", "dropped", signal.SIGTERM, "group", "the pipeline's run"),
    ("program", "waiting", "unseen", signal.SIGTERM, "command", "the program's run"),
)


def test_a_signal_whose_interruption_is_lost_on_its_way_still_ends_it(scripts: Path) -> None:
    """Ctrl-C or SIGTERM whose ``KeyboardInterrupt`` Python drops (raised in a weakref's
    callback) or something catches, while the command prepares the run, as the program is
    about to start or while a pipeline runs, or one that comes as the command is about to
    wait for its program: the run ends on it all the same, at its next step (before it takes
    its file, before the program starts, at once), as docs/cli.md says for that step, and
    nothing is said to have been ignored."""
    tries = []
    for i, (kind, step, how, sig, to, _) in enumerate(LOST):
        t = Try(kind, scripts / f"lost{i}.duckdb")
        tries.append((t, functools.partial(_at_pause, t, [INTERRUPTED, step, how], sig, to)))
    assert _all_at_once(tries) == [ending for *_, ending in LOST]
    for t, _ in tries:
        assert "Exception ignored" not in t.stderr, t.stderr[-3000:]
