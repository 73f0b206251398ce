"""``python -m streamscope.monitor CONFIG.json``: the dedicated monitor process.

In: a JSON config written by the application (topology, the compiled plan, output file, the ring
directory, the control socket it already listens on). Out: the run file, and JSON lines on
stdout: ready, frames as they close, done with the status. Started ahead (``--ahead FD``,
``core.ahead``), it waits on ``FD`` for the config's path and the descriptors of the control
socket and the run file's lock in a thread that then makes the run file (``_Early``), while it
loads its modules.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import shutil
import signal
import socket
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamscope.core import ahead
from streamscope.core.errors import StreamscopeError
from streamscope.core.process import GROUP_SIGNALS, end_now, keep_freed_memory, one_math_thread
from streamscope.store.duck import duckdb
from streamscope.store.lock import WriterLock
from streamscope.store.private import keep_private
from streamscope.store.writer import DuckDBStore

if TYPE_CHECKING:
    from streamscope.aggregate.points import DropCount, FrameResult
    from streamscope.monitor.service import MonitorService

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
            "cpu_ns": time.process_time_ns(),  # what watching costs, for --metrics
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
    # A crash of the process (a fault in a library it loads) says where, on the run's stderr,
    # beside the run's one line that the monitor was killed by it (seen once: SIGSEGV while it
    # started, with nothing more to go on).
    faulthandler.enable(all_threads=True)
    keep_private()  # the run file and DuckDB's log beside it hold the program's command line
    one_math_thread()  # before numpy loads, and before a thread that may read the environment
    early = _Early(argv)
    early.start()
    # The monitor's own modules (numpy, the reductions) load meanwhile: 0.2 s of its start
    from streamscope.monitor.service import MonitorService  # noqa: F401

    try:
        got = early.result()
    except (StreamscopeError, OSError, KeyError, ValueError, duckdb.Error) as exc:
        _emit({"event": "error", "error": str(exc)})
        return 2
    if got is None:
        return 0  # not needed after all
    cfg_path, cfg, store = got
    _say_group_signals()
    keep_freed_memory()  # the estimation's arrays, made and dropped every frame, reuse memory
    try:
        service, style = _start(cfg, store)
    except (StreamscopeError, OSError, KeyError, ValueError, duckdb.Error) as exc:
        store.close()
        _emit({"event": "error", "error": str(exc)})
        return 2
    _emit({"event": "ready"})
    if style is not None:  # what says the run at its end loads while the run goes on
        threading.Thread(target=_load_readers, daemon=True, name="readers").start()
    final = service.serve()
    said = _said(store, style) if style is not None else None
    store.close()
    # The run's private directory (rings, socket): the application removes it too, unless it
    # was killed.
    shutil.rmtree(cfg_path.parent, ignore_errors=True)
    _emit({"event": "done", "status": final.status.value, "error": final.error,
           "events": final.events, "late": final.late})  # fmt: skip
    if said is not None:
        _emit({"event": "said", "summary": said[0], "findings": said[1]})
    return 0


class _Early(threading.Thread):
    """What starts before the monitor's modules are loaded, beside them: wait for the config
    (started ahead: its path and descriptors on the socket), read it (the file is read once
    and removed: nothing is left behind if the application is killed), and make the run file
    empty (``DuckDBStore.open``: its copy, DuckDB's start; some 50 ms, most outside the
    interpreter's lock). ``result``: (the config's path, the config, the store), None when
    the process that started it ahead let it go, or what it raised."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(name="early", daemon=True)
        self._argv = argv
        self._got: tuple[Path, dict[str, Any], DuckDBStore] | None = None
        self._raised: BaseException | None = None

    def run(self) -> None:
        try:
            self._got = self._open()
        except BaseException as exc:  # said by ``result``, in the main thread
            self._raised = exc

    def result(self) -> tuple[Path, dict[str, Any], DuckDBStore] | None:
        self.join()
        if self._raised is not None:
            raise self._raised
        return self._got

    def _open(self) -> tuple[Path, dict[str, Any], DuckDBStore] | None:
        argv, fds = self._argv, None
        if len(argv) == 2 and argv[0] == ahead.FLAG:
            handed = ahead.receive(int(argv[1]))
            if handed is None:
                return None
            argv, fds = [handed[0]], handed[1]
        if len(argv) != 1:
            raise ValueError("usage: python -m streamscope.monitor CONFIG.json")
        cfg_path = Path(argv[0])
        cfg = json.loads(cfg_path.read_text())
        cfg_path.unlink()
        if fds is not None:  # the descriptors as they came here (the config's are the sender's)
            cfg["listen_fd"] = fds[0]
            cfg["lock_fd"] = fds[1] if cfg.get("lock_fd") is not None else None
        out = Path(cfg["out"])
        lock_fd = cfg.get("lock_fd")
        lock = WriterLock.adopt(out, int(lock_fd)) if lock_fd is not None else None
        store = DuckDBStore(
            out, overwrite=cfg["overwrite"], checkpoint_s=1.0, lock=lock, keep_ns=cfg.get("keep_ns")
        )
        store.open()
        return cfg_path, cfg, store


def _load_readers() -> None:
    """Load the modules ``_said`` says the run with (a failure is its own)."""
    with contextlib.suppress(Exception):
        import streamscope.report.said
        import streamscope.report.summary  # noqa: F401


def _said(store: DuckDBStore, style: tuple[int, str | None, bool]) -> tuple[str, str] | None:
    """The run's summary and top findings, written as the command's console shows them
    (``report.said.said_text``) from the finished file through the store's own connection,
    for the command to print; None where they cannot be (the command reads the run file
    itself then, and says what is wrong)."""
    try:
        from streamscope.report.said import said_text

        with store.written() as run:
            return said_text(run, style)
    except Exception:
        return None


def _start(
    cfg: dict[str, Any], store: DuckDBStore
) -> tuple[MonitorService, tuple[int, str | None, bool] | None]:
    """The monitor the config ``cfg`` describes, writing to ``store``; and the console the
    run's summary is written for (None: none is)."""
    from streamscope.core.topology import Topology
    from streamscope.monitor.service import MonitorService
    from streamscope.monitor.settings import MonitorSettings
    from streamscope.query.plan import Plan

    topology = Topology.from_dict(cfg["topology"])
    settings = MonitorSettings.from_dict(cfg["settings"])
    plan = Plan.loads(cfg["plan"])  # compiled and sited once, by the application
    live = bool(cfg.get("live", True))
    service = MonitorService(
        plan, topology, store, settings, listener=socket.socket(fileno=int(cfg["listen_fd"])),
        socket_path=cfg["socket"], ring_dir=cfg.get("rings"),
        on_frames=_on_frames if live else None, on_lag=_on_lag,
        on_broken=lambda why: _emit({"event": "broken", "error": why}),
        on_note=(lambda text: _emit({"event": "note", "text": text})) if live else None,
    )  # fmt: skip
    return service, settings.options.summary_console


if __name__ == "__main__":
    end_now(main(sys.argv[1:]))  # the run file closed and every line said: no teardown
