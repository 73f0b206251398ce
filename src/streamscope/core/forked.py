"""A module run as ``__main__`` in a child forked from this process, where this process has
loaded modules the child needs too: the child starts with them (no interpreter to start, no
import to run again), where one started afresh would load them all over again.

In: the module, its arguments, a name for the child (``/proc/PID/comm``, what ``top`` and
``pgrep`` show: its command line is this process's), the descriptors it must not keep. Out: a
``Forked``, what ``subprocess.Popen`` offers of the child that this package reads of a process
it started (its ``pid``, its ``stdout`` as a pipe to this process, ``poll``, ``wait``,
``returncode``, ``send_signal``, ``kill``), or None where forking is not safe: a process with
another thread (a lock another thread holds would stay held in the child for ever).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import runpy
import signal
import subprocess
import sys
import time
import traceback
from typing import IO

#: prctl's request to name the calling thread (linux/prctl.h); names are 15 bytes at most.
_PR_SET_NAME = 15
#: How often ``wait`` with a time limit looks at the child (s).
_POLL_S = 0.005


class Forked:
    """A forked child, read as ``subprocess.Popen`` reads one it started."""

    def __init__(self, pid: int, stdout: IO[str]) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self._reaped(os.WNOHANG)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if timeout is None:
            while self.returncode is None:
                self._reaped(0)
            return self.returncode
        end = time.monotonic() + timeout
        while self.poll() is None:
            if time.monotonic() >= end:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout)
            time.sleep(_POLL_S)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _reaped(self, flags: int) -> None:
        try:
            pid, status = os.waitpid(self.pid, flags)
        except ChildProcessError:  # reaped by someone else: as ``subprocess`` says then
            self.returncode = 0
            return
        if pid == self.pid:
            self.returncode = os.waitstatus_to_exitcode(status)


def alone() -> bool:
    """Whether this process runs one thread (its own or any native one): forking is safe."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def fork_module(
    module: str, args: list[str], name: str, close: tuple[int, ...] = ()
) -> Forked | None:
    """Run ``module`` as ``python -m MODULE ARGS`` would, in a forked child named ``name``, its
    stdout a pipe to this process and its stdin nothing; None where this process is not
    ``alone`` or cannot fork (the caller starts the module afresh then)."""
    if not alone():
        return None
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError:
        os.close(r)
        os.close(w)
        return None
    if pid == 0:  # the child: never returns
        _run(module, args, name, w, (r, *close))
    os.close(w)
    return Forked(pid, os.fdopen(r, "r", encoding="utf-8"))


def _run(module: str, args: list[str], name: str, stdout: int, close: tuple[int, ...]) -> None:
    code = 1
    try:
        os.dup2(stdout, 1)
        os.close(stdout)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        for fd in close:
            with contextlib.suppress(OSError):
                os.close(fd)
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_NAME, name.encode()[:15])
        atexit._clear()  # the parent's exit handlers are its own
        sys.argv = [module, *args]
        runpy.run_module(module, run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        os._exit(code)


__all__ = ["Forked", "alone", "fork_module"]
