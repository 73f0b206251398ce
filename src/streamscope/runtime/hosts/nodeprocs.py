"""The processes of a Ray cluster started in this process, and the signals while Ray runs here.

In: a started cluster (``ray.cluster_utils.Cluster``), or the Ray processes this process
started before a start was interrupted. Out: every one of them gone within about a second
(Ray's own shutdown ends them one at a time, a second each), and SIGTERM handled by this
process's own handler while Ray starts nodes or connects (Ray installs its own there).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterable, Iterator
from types import ModuleType
from typing import Any

#: How long a started cluster's raylets, told to end together, get before they are killed
#: (seconds; each ends its workers, and ends, within tens of ms), and then its other processes
#: (its control service and monitors end on SIGTERM only after seconds, if at all).
STOP_GRACE_S = (1.0, 0.1)


def stop_nodes(cluster: Any, grace_s: tuple[float, float] = STOP_GRACE_S) -> None:
    """Stop a started cluster: its raylets told to end together (each ends its workers), then
    its other processes, each group killed where still there after its grace (``grace_s``);
    then Ray's own bookkeeping, which finds them gone. This process must have disconnected
    from it first (``ray.shutdown``)."""
    nodes = [*getattr(cluster, "worker_nodes", ()), getattr(cluster, "head_node", None)]
    procs = [(kind, info.process) for node in nodes if node is not None
             for kind, infos in getattr(node, "all_processes", {}).items()
             for info in infos if info.process is not None]  # fmt: skip
    _end([p for kind, p in procs if kind == "raylet"], grace_s[0])
    _end([p for kind, p in procs if kind != "raylet"], grace_s[1])
    cluster.shutdown()


def _end(procs: list[subprocess.Popen[Any]], grace_s: float) -> None:
    """SIGTERM to each of ``procs`` at once; SIGKILL to those still there after ``grace_s``."""
    for proc in procs:
        if proc.poll() is None:
            with contextlib.suppress(OSError):
                proc.terminate()
    deadline = time.monotonic() + grace_s
    for proc in procs:
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(OSError):
                proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1.0)


def ray_processes(ray: ModuleType) -> dict[int, bool]:
    """This process's descendants that run Ray's programs (a node's processes and theirs),
    read from /proc (none where there is no /proc): pid -> whether it is a raylet. A start
    interrupted inside Ray leaves some that no node object holds."""
    home = (os.path.dirname(str(ray.__file__)) + os.sep).encode()
    parents: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    parents[int(entry)] = int(_stat(int(entry))[1])
    mine, grew = {os.getpid()}, True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in mine} - mine
        mine |= more
        grew = bool(more)
    out: dict[int, bool] = {}
    for pid in mine - {os.getpid()}:
        with contextlib.suppress(OSError):
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                line = f.read()
            if home in line or line.startswith(b"ray::"):  # a worker names itself so
                out[pid] = line.split(b"\0", 1)[0].endswith(b"/raylet")
    return out


def stop_strays(ray: ModuleType, before: Iterable[int]) -> None:
    """Kill what a start interrupted inside Ray left: Ray's processes among this process's
    descendants (``ray_processes``) that were not there ``before``. Nothing ran there yet.
    Its raylets are frozen first: one still starting goes on starting others, which a raylet
    killed leaves behind."""
    old = set(before)
    raylets = [pid for pid, raylet in ray_processes(ray).items() if raylet and pid not in old]
    for pid in raylets:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGSTOP)
    found = [pid for pid in ray_processes(ray) if pid not in old]
    for pid in found:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    for pid in found:  # this process's children among them, reaped
        with contextlib.suppress(OSError):
            os.waitpid(pid, 0)


def _stat(pid: int) -> list[bytes]:
    """The fields of ``/proc/PID/stat`` after the program's name: state, parent id, ..."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        return f.read().rsplit(b")", 1)[1].split()


@contextlib.contextmanager
def sigterm_kept(ray: ModuleType) -> Iterator[None]:
    """While Ray starts nodes in this process or connects it: SIGTERM keeps the process's own
    handler (Ray installs its own: a node's drains for 30 s, then exits 1; a driver's exits
    with status 15) and, where the process has none, interrupts as Ctrl-C does, so that what
    was started is stopped. Only the main thread handles signals."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGTERM)
    if previous in (signal.SIG_DFL, None):
        signal.signal(signal.SIGTERM, _interrupt)
    utils: Any = getattr(getattr(ray, "_private", None), "utils", None)
    install = getattr(utils, "set_sigterm_handler", None)
    if install is not None:
        utils.set_sigterm_handler = _keep
    _came.clear()
    try:
        yield
    except BaseException:
        _came.clear()  # what came is acted on
        raise
    finally:
        if install is not None:
            utils.set_sigterm_handler = install
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
    check_interrupted()


@contextlib.contextmanager
def driver_signals_kept(ray: ModuleType) -> Iterator[None]:
    """While this process connects to a cluster (``ray.init``): Ray's core leaves its signal
    handlers alone. It would install a C-level one for SIGTERM (and crashes) that, reached
    while the connection is made, prints Ray's report and aborts the process, or hangs it.
    (Ray reads the setting when the connection is made; its nodes keep theirs.)"""
    constants: Any = getattr(getattr(ray, "_private", None), "ray_constants", None)
    name = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"
    if not hasattr(constants, name):
        yield
        return
    before = getattr(constants, name)
    setattr(constants, name, True)
    try:
        yield
    finally:
        setattr(constants, name, before)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """While the block stops what an interrupted start left: a second Ctrl-C or SIGTERM does
    not interrupt it (it takes about a second); one that came is raised after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    held = (signal.SIGINT, signal.SIGTERM)
    previous = {s: signal.getsignal(s) for s in held}
    for s in held:
        signal.signal(s, lambda signum, frame: came.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, signal.SIG_DFL if handler is None else handler)
    if came:
        raise KeyboardInterrupt


def _keep(handler: Any) -> None:
    """In place of Ray's ``set_sigterm_handler`` (``sigterm_kept``): nothing is installed."""


#: The SIGTERMs ``sigterm_kept``'s handler turned into an interrupt, not yet acted on:
#: process-wide, as signal handlers are. Its ``KeyboardInterrupt`` is lost where Python ignores
#: exceptions, which it does in a fork's callbacks (filelock's ``_resume_parent_after_fork``:
#: beside a busy core a SIGTERM landed there once, and the command ran on as if none had
#: come): ``check_interrupted`` raises it anew.
_came: list[int] = []


def _interrupt(signum: int, frame: object) -> None:
    _came.append(signum)
    raise KeyboardInterrupt


def check_interrupted() -> None:
    """Interrupt (``KeyboardInterrupt``) if a SIGTERM came inside ``sigterm_kept``'s block
    and was not acted on: where each step of a cluster's start returns, and at the block's
    end."""
    if _came:
        _came.clear()
        raise KeyboardInterrupt
