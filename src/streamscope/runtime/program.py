"""Running an unmodified program monitored: ``streamscope run prog.py`` without ``pipeline()``.

In: a script's path (or a module's name), its arguments, queries (none: the defaults) and run
options. Out: the run's ``RunResult``, with the program's own exit status. The program runs in a
process of its own (``pipeline.program.auto.asmain``), as ``python prog.py`` would run it, its standard
queues, threads and processes watched; it ends as the interpreter ends it (its threads joined,
its exit handlers, its ``multiprocessing`` managers and children), so a monitored program ends
whenever the plain one would. This process holds the session: it passes on the signals sent to
it, stops the program at its time limit, and says what of the program outlived it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from streamscope.core.modes import RunStatus
from streamscope.core.process import GROUP_SIGNALS, machine_busy_ns
from streamscope.core.rings import declares
from streamscope.pipeline.program.registry import RAISED, REGISTRY, SESSION_ENV, USED, gathered
from streamscope.query.ast import Query
from streamscope.query.plan import Plan
from streamscope.runtime.heldsignals import dropped
from streamscope.runtime.instrument import monitor
from streamscope.runtime.options import FramesCallback, LagCallback, RunOptions, RunResult

#: A program stopped at its time limit gets SIGINT (as after Ctrl-C), then this long (s) to end
#: before it and its processes are killed.
STOP_GRACE_S = 5.0
#: Signals passed on to the program when this process gets them, unless they were sent to the
#: whole process group (the program, in it, got them already).
PASSED_ON = GROUP_SIGNALS
#: How long (s) a signal this process gets waits for the monitor's word that it went to the
#: whole group before it is passed on (a signal sent to this process alone waits this long).
GROUP_WAIT_S = 0.5
_PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True, slots=True)
class ProgramEnd:
    """How the program's process ended: ``returncode`` as ``subprocess`` gives it (negative:
    killed by that signal), the signal that reached it from outside while it ran (None:
    none), why it was stopped at its time limit or never started (None: it was not), what it
    raised (its exception, as ``Type: message``), its processes still running after it ended,
    and whether it started at all (a signal came first)."""

    returncode: int
    signalled: int | None = None
    stopped: str | None = None
    raised: str | None = None
    outlived: tuple[str, ...] = ()
    started: bool = True

    def status(self, name: str) -> tuple[RunStatus, str | None]:
        """The run's status, and why it was not completed."""
        rc = self.returncode
        if self.stopped is not None:
            return RunStatus.INTERRUPTED, self.stopped
        if self.signalled is not None:
            how = "" if rc == -self.signalled else f"; {name} then {_ended(rc)}"
            return RunStatus.INTERRUPTED, f"interrupted by {_signame(self.signalled)}{how}"
        if rc == 0:
            return RunStatus.COMPLETED, None
        if self.raised is not None and rc == 1:
            return RunStatus.FAILED, f"{name} raised {self.raised}"
        return RunStatus.FAILED, f"{name} {_ended(rc)}"


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _ended(rc: int) -> str:
    return f"was killed by {_signame(-rc)}" if rc < 0 else f"exited with status {rc}"


def run_program(
    target: str,
    argv: Sequence[str],
    queries: Sequence[Query | str],
    options: RunOptions,
    *,
    module: bool = False,
    on_frames: FramesCallback | None = None,
    on_lag: LagCallback | None = None,
    on_note: Callable[[str], None] | None = None,
    plan: Plan | None = None,
    on_started: Callable[[], None] | None = None,
) -> RunResult:
    """Run ``target`` (a script's path; a module's name with ``module``) as ``__main__`` with
    ``argv`` under the monitor, in a process of its own that writes to this one's standard
    streams. The result's ``program_exit`` is the program's exit status as ``subprocess``
    gives it (None when its time limit stopped it); the run is failed when that is not 0,
    interrupted when a signal or the time limit ended it. ``plan``: as ``monitor``'s;
    ``on_started`` is called once the program's process has started."""
    name = target if module else Path(target).stem
    with (
        monitor(
            queries, options, on_frames=on_frames, on_lag=on_lag, on_note=on_note, name=name,
            time_limit=False, plan=plan,
        ) as session,
        _reaping(),
    ):  # fmt: skip
        mon = session.monitor_cpu_ns or (lambda: -1)
        busy0, wall0, own0, mon0 = machine_busy_ns(), time.monotonic_ns(), _own_cpu_ns(), mon()
        end = _run(target, argv, module, options.timeout_ns, session.group_signal, on_started)
        busy, own, used = machine_busy_ns(), _own_cpu_ns() - own0, mon() - mon0
        if session.note is not None and 0 <= busy0 <= busy and mon0 >= 0 and used >= 0:
            # what the machine ran beside the program, this command and the monitor: the
            # what-if's background load
            session.note({"machines": {"main": {
                "busy_ns": max(busy - busy0 - own - used, 0),
                "wall_ns": time.monotonic_ns() - wall0,
                **gathered(REGISTRY.directory or "."),  # what watching its threads cost
            }}})  # fmt: skip
        session.ended = end.status(name)
        session.notes.extend(("outlived", f"{text} outlived the program") for text in end.outlived)
        seen = _nothing_seen() if end.started else None
        if seen is not None:
            session.notes.append(("empty", seen))
    assert session.result is not None
    if end.stopped is not None:
        return session.result  # its time limit: the command says the run was interrupted
    return session.result.with_program_exit(end.returncode)


def _own_cpu_ns() -> int:
    """CPU ns of this process and of the children it has waited for (the program, and what it
    waited for of its own)."""
    t = os.times()
    return round((t.user + t.system + t.children_user + t.children_system) * 1e9)


def _run(
    target: str,
    argv: Sequence[str],
    module: bool,
    timeout_ns: int | None,
    group_signal: Callable[[int, float], bool | None] | None,
    on_started: Callable[[], None] | None = None,
) -> ProgramEnd:
    """The program's process, from its start to its end (or its time limit). ``group_signal``
    says whether a signal this process got was sent to its whole process group."""
    raised = Path(REGISTRY.directory or ".", RAISED)
    command = [sys.executable, "-m", "streamscope.pipeline.program.auto.asmain"]
    parent = ["--parent", str(os.getpid())]
    got: list[int] = []
    running: list[subprocess.Popen[bytes]] = []

    def pass_on(sig: int, _frame: object) -> None:
        got.append(sig)
        if not running:
            return  # the program is not started (below)
        group = group_signal(sig, GROUP_WAIT_S) if group_signal is not None else None
        if group is None:  # no one to ask: the terminal's Ctrl-C went to the group
            group = sig == signal.SIGINT and _foreground()
        if not group:  # once, as plain Python gets it
            with contextlib.suppress(ProcessLookupError):
                running[0].send_signal(sig)

    stopped = None
    with _handling(PASSED_ON, pass_on):
        got.extend(dropped())  # (one whose interruption was lost on its way: as come now)
        if got:  # a signal came before the program started: it does not
            why = f"interrupted by {_signame(got[0])} before the program started"
            return ProgramEnd(128 + got[0], got[0], why, started=False)
        proc = subprocess.Popen([*command, *parent, *(["-m"] if module else []), target, *argv])
        running.append(proc)
        for sig in dict.fromkeys(got):
            # It came while the program's process was made, which may have missed it: passed
            # on (where the program got it too, as sent to the whole group, it gets it twice)
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)
        if on_started is not None:
            on_started()
        try:
            _wait(proc, None if timeout_ns is None else timeout_ns / 1e9)
        except subprocess.TimeoutExpired:
            stopped = f"stopped after its time limit of {timeout_ns / 1e9:g} s"  # type: ignore[operator]
            _stop(proc)
    outlived = _outlived(proc.pid, kill=stopped is not None)
    text = None
    with contextlib.suppress(OSError):
        text = raised.read_text().strip() or None
    return ProgramEnd(proc.returncode, got[0] if got else None, stopped, text, outlived)


def _wait(proc: subprocess.Popen[bytes], timeout_s: float | None) -> None:
    """Until the program's process ended (``subprocess.TimeoutExpired`` after ``timeout_s``),
    each signal this process gets handled as it comes (``pass_on``). Python runs a handler
    between two of its instructions: a signal that came after the last of them, as this
    process was about to wait, would be handled once the program ended (never, for one that
    runs on); so the wait wakes on the signals' wakeup fd, written as each comes, and on the
    program's end (its pidfd). Where either cannot be had, as ``Popen.wait`` waits."""
    with _woken_by_signals() as woken:
        pidfd = None
        if woken is not None:
            with contextlib.suppress(AttributeError, OSError):  # (not Linux 5.3+; reaped)
                pidfd = os.pidfd_open(proc.pid)
        if woken is None or pidfd is None:
            proc.wait(timeout_s)
            return
        try:
            deadline = None if timeout_s is None else time.monotonic() + timeout_s
            while proc.poll() is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(proc.args, timeout_s or 0.0)
                select.select([pidfd, woken], [], [], left)
                with contextlib.suppress(BlockingIOError):
                    os.read(woken, 512)  # (their handlers ran as select returned)
        finally:
            os.close(pidfd)


@contextlib.contextmanager
def _woken_by_signals() -> Iterator[int | None]:
    """A descriptor readable once a signal came to this process while the block runs (the
    process's signal wakeup fd), or None where it can have none: not on the main thread, or
    one of another's is there (left to it)."""
    woken, wake = os.pipe()
    os.set_blocking(woken, False)
    os.set_blocking(wake, False)
    try:
        try:
            other = signal.set_wakeup_fd(wake, warn_on_full_buffer=False)
        except ValueError:  # not the main thread: the signals are not its
            yield None
            return
        try:
            if other != -1:
                signal.set_wakeup_fd(other)
            yield woken if other == -1 else None
        finally:
            if other == -1:
                signal.set_wakeup_fd(-1)
    finally:
        os.close(woken)
        os.close(wake)


def _nothing_seen() -> str | None:
    """What to say of a run that found no stage or no channel (None: it found both), naming
    what the program used that streamscope does not watch."""
    directory = REGISTRY.directory
    if directory is None:
        return None
    stage, channel = declares(directory, REGISTRY.topology())
    if stage and channel:
        return None
    missing = "no stage and no channel" if not stage else "no channel"
    used = []
    with contextlib.suppress(OSError):
        used = Path(directory, USED).read_text().splitlines()
    what = (
        f"it used {', '.join(used)}, which streamscope does not watch"
        if used
        else "it used none of them"
    )
    return (
        f"{missing} was seen: a stage is a thread, process or task that puts into or gets from "
        f"a standard queue (queue, multiprocessing, asyncio), a channel such a queue; {what}"
    )


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """The time limit: SIGINT (the program's own handlers and ``finally`` blocks run), then,
    if it has not ended within ``STOP_GRACE_S``, SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGINT)
    try:
        proc.wait(STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _foreground() -> bool:
    """Whether this process's group is its terminal's foreground group: then the terminal's
    Ctrl-C reached the program as well (it runs in the same group)."""
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == os.getpgrp()
    return False


@contextlib.contextmanager
def _handling(
    signals: Sequence[signal.Signals], handler: Callable[[int, object], None]
) -> Iterator[None]:
    """``handler`` for ``signals`` while the block runs (on the main thread only: elsewhere
    the signals keep their handlers)."""
    saved = {}
    with contextlib.suppress(ValueError):  # not the main thread
        for sig in signals:
            saved[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


@contextlib.contextmanager
def _reaping() -> Iterator[None]:
    """While the program runs, the processes it leaves behind become this process's children
    (Linux: a child subreaper), so that its end can say which outlived it."""
    libc = None
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        yield
    finally:
        if libc is not None:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


#: How long the program's processes left when it ended have to end on their own before they
#: are said to have outlived it (s): ``multiprocessing``'s and loky's resource trackers end as
#: soon as they read that the program's end closed their pipe, and clean up after it first.
GRACE_S = 1.0


def _left(program: int) -> list[int]:
    return [p for p in _children(os.getpid()) if p != program and _program_process(p)]


def _ended_on_their_own(program: int) -> list[int]:
    """The program's processes still running ``GRACE_S`` after it ended (those that ended
    meanwhile reaped)."""
    deadline = time.monotonic() + GRACE_S
    seen: set[int] = set()
    while True:
        left = _left(program)
        for pid in seen.difference(left):
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
        seen.update(left)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.02)


def _outlived(program: int, *, kill: bool) -> tuple[str, ...]:
    """The program's processes still running once it ended (left to this process: see
    ``_reaping``) and ``GRACE_S`` after, each as ``pid (command line)``; ``kill``: killed
    instead (its time limit), and those they leave behind in turn."""
    if not kill:
        return tuple(f"{pid} ({_cmdline(pid)})" for pid in _ended_on_their_own(program))
    for _ in range(100):
        left = _left(program)
        if not left:
            return ()
        for pid in left:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for pid in left:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
    return ()


def _children(parent: int) -> list[int]:
    """The live processes whose parent is ``parent`` (from /proc; none where it is missing)."""
    out = []
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            with contextlib.suppress(OSError, ValueError, IndexError):
                stat = Path("/proc", entry, "stat").read_text()
                fields = stat[stat.rindex(")") + 2 :].split()
                if int(fields[1]) == parent and fields[0] != "Z":
                    out.append(int(entry))
    return out


def _program_process(pid: int) -> bool:
    """Whether ``pid`` is the program's (not the monitor, started before the session was in
    the environment): its environment carries the session, as the program's processes
    inherit it."""
    mark = SESSION_ENV.encode() + b"="
    with contextlib.suppress(OSError):
        env = Path("/proc", str(pid), "environ").read_bytes()
        return any(v.startswith(mark) for v in env.split(b"\0"))
    return False


def _cmdline(pid: int) -> str:
    with contextlib.suppress(OSError):
        return (
            Path("/proc", str(pid), "cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()
        )
    return "?"


__all__ = ["ProgramEnd", "run_program"]
