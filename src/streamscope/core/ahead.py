"""A process started ahead of the moment it is needed, so that its own start (its interpreter,
its imports) runs beside what the process that needs it does before that moment.

In: a module that, run as ``python -m MODULE --ahead FD``, waits on the socket ``FD`` for a
line of text and the descriptors that come with it (``receive``). Out: ``start`` starts it;
``take`` gives the one started for a module, whose ``hand`` sends it what it waits for; one
that is never handed anything (``drop``, or this process ends) reads the end of the socket
and ends.

``streamscope run`` starts its monitor so, before it loads its commands, the program's
libraries and compiles the run's queries: the monitor's imports (numpy, DuckDB, the
reductions) are done by the time the run starts, rather than after it. Forked from the
command once it has loaded the modules both need (``core.forked``), it loads only its own.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys

from streamscope.core.forked import Forked, fork_module
from streamscope.core.process import GROUP_SIGNALS

#: The flag a module's ``__main__`` reads: it was started ahead (the socket's descriptor next).
FLAG = "--ahead"
#: The longest line handed over (bytes).
MAX_TEXT = 1 << 16


class Ahead:
    """One process started ahead, waiting: ``proc`` (its stdout a pipe to this process, its
    stdin nothing), and this end of the socket it waits on. ``fork_as``: forked from this
    process where that is safe (``core.forked``: it starts with the modules loaded here), and
    named so (``/proc/PID/comm``, ``pgrep``: its command line is this process's), else
    started afresh."""

    def __init__(self, module: str, *, fork_as: str | None = None) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # Started with the signals sent to the whole process group held, as the process it
        # stands for would be: one that comes while it starts waits for it.
        held = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
        try:
            args = [FLAG, str(theirs.fileno())]
            proc: Forked | None = None
            if fork_as is not None:
                proc = fork_module(module, args, fork_as, close=(mine.fileno(),))
            self.proc: Forked | subprocess.Popen[str] = proc or subprocess.Popen(
                [sys.executable, "-m", module, *args], stdout=subprocess.PIPE,
                stdin=subprocess.DEVNULL, text=True, pass_fds=(theirs.fileno(),),
            )  # fmt: skip
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
            theirs.close()
        self.sock = mine

    def hand(self, text: str, fds: tuple[int, ...]) -> Forked | subprocess.Popen[str]:
        """Send it ``text`` and (copies of) ``fds``; its process, from now on the caller's."""
        try:
            socket.send_fds(self.sock, [text.encode()], list(fds))
        finally:
            self.sock.close()
        return self.proc

    def drop(self) -> None:
        """It is not needed: it reads the end of its socket and ends (not waited for)."""
        self.sock.close()


#: The processes started ahead and not taken yet, by module: process-wide, as the command
#: that starts one early (``cli.main``) and the code that takes it (``runtime.launch``) are
#: far apart in one process.
_started: dict[str, Ahead] = {}


def start(module: str, *, fork_as: str | None = None) -> None:
    """Start ``module`` ahead (once: a second call while one waits does nothing)."""
    if module not in _started:
        with contextlib.suppress(OSError):
            _started[module] = Ahead(module, fork_as=fork_as)


def take(module: str) -> Ahead | None:
    """The process started ahead for ``module``, now the caller's (None: none was)."""
    return _started.pop(module, None)


def drop_all() -> None:
    """Let every process started ahead and not taken end."""
    while _started:
        _started.popitem()[1].drop()


def receive(fd: int) -> tuple[str, list[int]] | None:
    """In the process started ahead: wait for what it was started for (the line, and the
    descriptors, now its own); None when the process that started it let it go."""
    with socket.socket(fileno=fd) as sock:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_TEXT, 8)
        except OSError:
            return None
    if not data:
        return None
    return data.decode(), fds


__all__ = ["FLAG", "Ahead", "drop_all", "receive", "start", "take"]
