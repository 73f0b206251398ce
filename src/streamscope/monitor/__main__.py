"""``python -m streamscope.monitor CONFIG.json``: the dedicated monitor process.

In: a JSON config written by the application (topology, the compiled plan, output file, the ring
directory, the control socket it already listens on). Out: the run file, and JSON lines on
stdout: ready, frames as they close, done with the status. Started ahead (``--ahead FD``,
``core.ahead``), it loads its modules first, then waits on ``FD`` for the config's path and
the descriptors of the control socket and the run file's lock.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import ahead
from streamscope.core.errors import StreamscopeError
from streamscope.core.process import GROUP_SIGNALS, end_now, keep_freed_memory
from streamscope.core.topology import Topology
from streamscope.monitor.service import MonitorService
from streamscope.monitor.settings import MonitorSettings
from streamscope.query.plan import Plan
from streamscope.store.duck import duckdb
from streamscope.store.lock import WriterLock
from streamscope.store.writer import DuckDBStore

#: Lines go out from the monitor's loop (notes) and its writer (frames, once written): one
#: lock for the process's stdout.
_emit_lock = threading.Lock()


def _emit(obj: dict[str, object]) -> None:
    line = json.dumps(obj) + "\n"
    try:
        with _emit_lock:
            sys.stdout.write(line)
            sys.stdout.flush()
    except BrokenPipeError:
        # The application is gone (killed): the run file must still be finished, so stop talking.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


_lag = [0]


def _on_lag(lag_ns: int) -> None:
    _lag[0] = lag_ns


def _on_frames(results: Sequence[FrameResult], drops: Sequence[DropCount]) -> None:
    _emit(
        {
            "event": "frames",
            "lag_ns": _lag[0],
            "results": [r.to_dict() for r in results],
            "drops": [
                {
                    "probe_id": d.probe_id,
                    "frame": d.frame,
                    "dropped": d.dropped,
                    "recorded": d.recorded,
                }
                for d in drops
            ],
        }
    )


def _say_group_signals() -> None:
    """A signal sent to the run's whole process group (Ctrl-C, a supervisor's SIGTERM) does not
    end the monitor: the application decides and tells it how the run ended. Each is said on
    stdout as it arrives (``{"event": "signal"}``), so that the process running a program can
    tell a signal sent to the group, which the program got too, from one sent to it alone."""
    read, write = os.pipe()
    os.set_blocking(write, False)
    for sig in GROUP_SIGNALS:
        signal.signal(sig, _arrived)
        signal.siginterrupt(sig, False)  # the system calls of our threads and libraries go on
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)  # written as the signal arrives
    # Held while this process started (``runtime.launch``): those that came meanwhile arrive
    # now, and are said before this process says it says them as they come.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, GROUP_SIGNALS)
    os.set_blocking(read, False)
    with contextlib.suppress(BlockingIOError):
        _say(os.read(read, 64))
    os.set_blocking(read, True)
    _emit({"event": "signals"})
    threading.Thread(target=_say_signals, args=(read,), daemon=True, name="signals").start()


def _arrived(signum: int, frame: object) -> None:
    """Nothing more to do: ``_say_signals`` said it already."""


def _say_signals(fd: int) -> None:
    while True:
        _say(os.read(fd, 64))


def _say(signals: bytes) -> None:
    for sig in signals:
        if sig in GROUP_SIGNALS:
            _emit({"event": "signal", "signum": sig})


def main(argv: list[str]) -> int:
    fds: list[int] | None = None
    if len(argv) == 2 and argv[0] == ahead.FLAG:
        handed = ahead.receive(int(argv[1]))
        if handed is None:
            return 0  # not needed after all
        argv, fds = [handed[0]], handed[1]
    _say_group_signals()
    keep_freed_memory()  # the estimation's arrays, made and dropped every frame, reuse memory
    if len(argv) != 1:
        print("usage: python -m streamscope.monitor CONFIG.json", file=sys.stderr)
        return 2
    cfg_path = Path(argv[0])
    try:
        service, store, style = _start(cfg_path, fds)
    except (StreamscopeError, OSError, KeyError, ValueError, duckdb.Error) as exc:
        _emit({"event": "error", "error": str(exc)})
        return 2
    _emit({"event": "ready"})
    if style is not None:  # what says the run at its end loads while the run goes on
        threading.Thread(target=_load_readers, daemon=True, name="readers").start()
    final = service.serve()
    store.close()
    # The run's private directory (rings, socket): the application removes it too, unless it
    # was killed.
    shutil.rmtree(cfg_path.parent, ignore_errors=True)
    _emit({"event": "done", "status": final.status.value, "error": final.error,
           "events": final.events, "late": final.late})  # fmt: skip
    if style is not None:
        _say_run(store.path, style)
    return 0


def _load_readers() -> None:
    """Load the modules ``_say_run`` reads and says the run with (a failure is its own)."""
    with contextlib.suppress(Exception):
        import streamscope.report.said
        import streamscope.report.summary  # noqa: F401


def _say_run(path: Path, style: tuple[int, str | None, bool]) -> None:
    """The run's summary and top findings, written as the command's console shows them
    (``report.said.said_text``), for it to print; nothing where they cannot be (the command
    reads the run file itself then, and says what is wrong)."""
    try:
        from streamscope.report.said import said_text

        summary, findings = said_text(path, style)
    except Exception:
        return
    _emit({"event": "said", "summary": summary, "findings": findings})


def _start(
    cfg_path: Path, fds: list[int] | None
) -> tuple[MonitorService, DuckDBStore, tuple[int, str | None, bool] | None]:
    """The monitor the config at ``cfg_path`` describes (the file is read once and removed:
    nothing is left behind if the application is killed), with its run file open. ``fds``:
    started ahead, the control socket's and the lock's descriptors as they came to it (the
    config's numbers are the application's). And the console the run's summary is written for
    (None: none is)."""
    cfg = json.loads(cfg_path.read_text())
    cfg_path.unlink()
    if fds is not None:
        cfg["listen_fd"] = fds[0]
        cfg["lock_fd"] = fds[1] if cfg.get("lock_fd") is not None else None
    topology = Topology.from_dict(cfg["topology"])
    settings = MonitorSettings.from_dict(cfg["settings"])
    plan = Plan.loads(cfg["plan"])  # compiled and sited once, by the application
    out = Path(cfg["out"])
    lock_fd = cfg.get("lock_fd")
    lock = WriterLock.adopt(out, int(lock_fd)) if lock_fd is not None else None
    store = DuckDBStore(out, overwrite=cfg["overwrite"], checkpoint_s=1.0, lock=lock)
    live = bool(cfg.get("live", True))
    service = MonitorService(
        plan, topology, store, settings, listener=socket.socket(fileno=int(cfg["listen_fd"])),
        socket_path=cfg["socket"], ring_dir=cfg.get("rings"),
        on_frames=_on_frames if live else None, on_lag=_on_lag,
        on_broken=lambda why: _emit({"event": "broken", "error": why}),
        on_note=(lambda text: _emit({"event": "note", "text": text})) if live else None,
    )  # fmt: skip
    return service, store, settings.options.summary_console


if __name__ == "__main__":
    end_now(main(sys.argv[1:]))  # the run file closed and every line said: no teardown
