"""Starting a run's monitor beside the application, without waiting for it.

In: the compiled queries, the topology, the run's metadata and options. Out: a ``Launched``
monitor: the run's private directory (its ring directory and control socket), this process's
control link, and at the end how the monitor finished the run file.

The application never waits for the monitor to be ready: the control socket is bound and
listening here before the monitor starts (the kernel holds connections until it accepts them),
and the probes' rings are memory the monitor maps whenever it gets there. The monitor's own
start (its imports, the run file) runs beside the first items, not before them.

Whenever the monitor dies, from its first instant on, this process finishes the run file as
failed, saying why (``runtime.unfinished``); from the monitor's start to the moment the run
can end on Ctrl-C or SIGTERM, and while its end is told, those wait (``runtime.heldsignals``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import ahead
from streamscope.core.clock import Clock, HostClock
from streamscope.core.errors import ConfigError
from streamscope.core.forked import Forked
from streamscope.core.modes import RunMode, RunStatus
from streamscope.core.process import GROUP_SIGNALS
from streamscope.core.rings import close_journal, ring_directory
from streamscope.core.topology import Topology
from streamscope.monitor.settings import MonitorSettings
from streamscope.query.plan import Plan
from streamscope.runtime.heldsignals import HeldSignals, handle_dropped
from streamscope.runtime.leftovers import record_run_file, sweep
from streamscope.runtime.options import (
    FramesCallback,
    LagCallback,
    RunOptions,
    RunResult,
    told_lag,
)
from streamscope.store.lock import WriterLock
from streamscope.store.writer import DuckDBStore, InMemoryStore, RunMeta, RunStore
from streamscope.transport.channels import InMemoryTransport, UnixSocketTransport
from streamscope.transport.control import Control
from streamscope.transport.wire import MsgType

#: The monitor process's module (``python -m``); ``streamscope run`` starts it ahead.
MONITOR = "streamscope.monitor"
#: File names inside a run's private directory.
SOCKET, RINGS, TRUTH, CONFIG = "monitor.sock", "rings", "truth", "config.json"
#: The longest (s) a signal this process got waits for the monitor process, still starting, to
#: say whether it got it too (``Launched.group_signal``).
MONITOR_START_S = 10.0
#: The run files this process's runs took, in order (process-wide: a command that a signal
#: ends says whether its run had a file, and which).
TAKEN: list[Path] = []


class Launched:
    """A run's monitor, started. ``control`` is this process's link to it; ``failure`` says
    whether it already gave up (it could not write the run file, or died); ``finish`` waits
    until it has finished the run file."""

    def __init__(
        self,
        plan: Plan,
        topology: Topology,
        meta: RunMeta,
        opts: RunOptions,
        on_frames: FramesCallback | None = None,
        on_lag: LagCallback | None = None,
        on_note: Callable[[str], None] | None = None,
        clock: Clock | None = None,
    ) -> None:
        """``clock``: the host's, which the run's start and end are read from (tests give
        another)."""
        self.clock = clock if clock is not None else HostClock()
        if opts.mode == RunMode.PROCESS and opts.out is None:
            raise ConfigError("a dedicated monitor process needs an output file (--out)")
        self.opts = opts
        #: Ctrl-C and SIGTERM wait while the monitor is started, until the run can end on
        #: them (``let_signals_in``), and while its end is told (``end`` to ``cleanup``); one
        #: whose interruption was lost on its way before ends the command here, before the
        #: run takes its file.
        self.signals = HeldSignals()
        self.signals.hold(start=True)
        self.lock = None
        try:
            #: One writer per run file, from before the application starts to the file's end.
            self.lock = WriterLock(opts.out).acquire() if opts.out is not None else None
            self._on_note = on_note
            self._launch(plan, topology, meta, on_frames, on_lag)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            self.signals.let_in()  # one that came meanwhile ends the command now
            raise
        if opts.out is not None:
            TAKEN.append(opts.out)

    def _launch(
        self,
        plan: Plan,
        topology: Topology,
        meta: RunMeta,
        on_frames: FramesCallback | None,
        on_lag: LagCallback | None,
    ) -> None:
        opts = self.opts
        #: What the run file says of the run, should this process have to write it.
        self._about = (meta, topology, plan)
        self._t0 = 0
        #: The monitor process said it is ready (its start is over); the run's end was told.
        self._ready = self._told = False
        self.dir = ring_directory(tempfile.gettempdir())
        if opts.out is not None:
            record_run_file(self.dir, opts.out)
        sweep(Path(self.dir).parent)  # what runs killed outright left beside it
        self.ring_dir = os.path.join(self.dir, RINGS)
        os.mkdir(self.ring_dir, 0o700)
        self.socket_path = os.path.join(self.dir, SOCKET)
        self.truth_dir: str | None = None
        if opts.ground_truth:
            self.truth_dir = os.path.join(self.dir, TRUTH)
            os.mkdir(self.truth_dir, 0o700)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(self.socket_path)
        os.chmod(self.socket_path, 0o600)
        listener.listen(64)
        self._events: list[dict[str, Any]] = []
        self._error: str | None = None
        self._proc: subprocess.Popen[str] | Forked | None = None
        self._reader: threading.Thread | None = None
        self.store: RunStore | None = None
        self._inline: Any = None
        self._on_lag = on_lag
        #: The signals the monitor process said it got (signal: how many), and how many of
        #: them ``group_signal`` matched to this process's own.
        self._signals: dict[int, int] = {}
        self._matched: dict[int, int] = {}
        self._said = threading.Condition()
        #: Whether the monitor says the group's signals as they come (it has said those that
        #: came while it started).
        self._saying = False
        if opts.mode == RunMode.PROCESS:
            # Connected while this process listens too: the link holds, whenever the monitor
            # accepts it, and says the monitor is gone (its sends fail) if it dies first.
            self.control = Control(UnixSocketTransport(self.socket_path))
            self._start_process(plan, topology, meta, listener, on_frames)
        else:
            inbox = self._start_inline(plan, topology, meta, listener, on_frames)
            self.control = Control(InMemoryTransport(inbox))

    def _start_process(
        self,
        plan: Plan,
        topology: Topology,
        meta: RunMeta,
        listener: socket.socket,
        on_frames: FramesCallback | None,
    ) -> None:
        opts = self.opts
        config = {
            "out": str(opts.out),
            "overwrite": opts.overwrite,
            "keep_ns": opts.keep_ns,
            "listen_fd": listener.fileno(),
            "socket": self.socket_path,
            "rings": self.ring_dir,
            "topology": topology.to_dict(),
            "plan": plan.dumps(),
            "settings": self._settings(meta).to_dict(),
            "lock_fd": self.lock.inheritable() if self.lock is not None else None,
            # Frames go to the application's stdout pipe only when someone here watches them.
            "live": on_frames is not None or self._on_lag is not None,
        }
        cfg_path = os.path.join(self.dir, CONFIG)
        with open(cfg_path, "w") as f:
            json.dump(config, f)
        fds = (listener.fileno(), *([self.lock.fd] if self.lock and self.lock.fd else []))
        waiting = ahead.take(MONITOR)
        if waiting is not None:  # started ahead (``streamscope run``): its modules loaded
            with contextlib.suppress(OSError):  # (it died meanwhile: one is started now)
                self._proc = waiting.hand(cfg_path, fds)
        if self._proc is None:
            # The monitor starts with the signals sent to the run's process group held: one
            # that comes while it starts waits for it to take it, instead of ending it.
            held = signal.pthread_sigmask(signal.SIG_BLOCK, GROUP_SIGNALS)
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", MONITOR, cfg_path], stdout=subprocess.PIPE,
                    stdin=subprocess.DEVNULL, text=True, pass_fds=fds,
                )  # fmt: skip
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
        listener.close()  # the monitor's now
        assert self._proc.stdout is not None
        self._reader = threading.Thread(
            target=self._read_events, args=(self._proc.stdout, on_frames), daemon=True
        )
        self._reader.start()

    def _start_inline(
        self,
        plan: Plan,
        topology: Topology,
        meta: RunMeta,
        listener: socket.socket,
        on_frames: FramesCallback | None,
    ) -> Any:
        """The monitor in a thread of this process; returns its inbox."""
        from streamscope.monitor.service import InlineMonitor, MonitorService  # its own start

        opts = self.opts
        self.store = (
            DuckDBStore(opts.out, overwrite=opts.overwrite, lock=self.lock, keep_ns=opts.keep_ns)
            if opts.out
            else InMemoryStore()
        )
        service = MonitorService(
            plan, topology, self.store, self._settings(meta), listener=listener,
            ring_dir=self.ring_dir, on_frames=on_frames, on_lag=self._on_lag,
            on_note=self._on_note,
        )  # fmt: skip
        self._inline = InlineMonitor(service)
        return service.inbox

    def _settings(self, meta: RunMeta) -> MonitorSettings:
        """The run's options as its monitor takes them."""
        return MonitorSettings(meta, self.opts, self.truth_dir)

    def _read_events(self, stream: IO[str], on_frames: FramesCallback | None) -> None:
        for line in stream:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            kind = ev.get("event")
            if kind == "frames" and self._on_lag is not None:
                cpu = ev.get("cpu_ns")
                told_lag(
                    self._on_lag, int(ev.get("lag_ns", 0)), int(cpu) if cpu is not None else None
                )
            if kind == "frames" and on_frames is not None:
                results = [FrameResult.from_dict(r) for r in ev["results"]]
                drops = [DropCount(**d) for d in ev["drops"]]
                on_frames(results, drops)
            elif kind == "ready":
                self._ready = True
            elif kind == "error":
                self._error = f"the monitor process failed to start: {ev.get('error')}"
            elif kind == "note" and self._on_note is not None:
                self._on_note(str(ev.get("text", "")))
            elif kind == "broken":
                self._error = str(ev.get("error"))
            elif kind in ("done", "said"):
                self._events.append(ev)
            elif kind in ("signal", "signals"):
                with self._said:
                    if kind == "signals":
                        self._saying = True
                    else:
                        sig = int(ev.get("signum", 0))
                        self._signals[sig] = self._signals.get(sig, 0) + 1
                    self._said.notify_all()

    def monitor_cpu_ns(self) -> int:
        """The monitor process's CPU time so far (ns; ``/proc/PID/stat``), -1 where it runs in
        this process or cannot be read."""
        if self._proc is None:
            return -1
        try:
            with open(f"/proc/{self._proc.pid}/stat", encoding="ascii") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return -1
        # after the command's name: state is field 3, utime and stime fields 14 and 15
        return (int(fields[11]) + int(fields[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")

    def group_signal(self, sig: int, wait_s: float) -> bool | None:
        """Whether the signal ``sig`` that this process got was sent to its whole process group
        (the monitor's process, in the group, says it got one too), waiting up to ``wait_s``
        for it to say so once it says signals as they come (up to ``MONITOR_START_S`` for
        that: one that came while it started is said then); each of the monitor's signals
        answers one call. None: no one to ask (the monitor runs in a thread here)."""
        if self._proc is None:
            return None
        with self._said:
            if not self._wait_said(lambda: self._saying, MONITOR_START_S):
                return False
            if not self._wait_said(
                lambda: self._signals.get(sig, 0) > self._matched.get(sig, 0), wait_s
            ):
                return False
            self._matched[sig] = self._matched.get(sig, 0) + 1
            return True

    def _wait_said(self, said: Callable[[], bool], wait_s: float) -> bool:
        """Wait (holding ``_said``) until ``said()``, at most ``wait_s`` and while the monitor
        runs."""
        deadline = time.monotonic() + wait_s
        while not said():
            left = deadline - time.monotonic()
            if left <= 0 or (self._proc is not None and self._proc.poll() is not None):
                return False
            self._said.wait(min(left, 0.1))
        return True

    def begin(self) -> int:
        """Tell the monitor the application starts now; returns the host's ticks then."""
        t0 = self._t0 = self.clock.now_ticks()
        self.control.send(MsgType.START, t0, info={})
        return t0

    def end(
        self, status: RunStatus, error: str | None, notes: Sequence[tuple[str, str]] = ()
    ) -> None:
        """Tell the monitor how the application ended (after its last records), with what
        the run says of itself (``notes``: ``(about, text)``), and close the link; ``finish``
        then waits for the run file. Ctrl-C and SIGTERM end nothing from here on."""
        self.hold_signals()
        self._told = True
        end = self.clock.now_ticks()  # after the last records, so none lies beyond the end
        info = {"status": status.value, "error": error, "notes": [list(n) for n in notes]}
        self.control.send(MsgType.FINISH, end, info=info)
        self.control.close()

    def failure(self) -> str | None:
        """Why the monitor can no longer record this run (None while it can). A signal whose
        interruption was lost on its way (``heldsignals.dropped``) interrupts the run here: a
        pipeline's run asks while it goes on."""
        handle_dropped()
        if self._error is not None:
            return self._error
        if self._inline is not None:
            broken: str | None = self._inline.service.broken
            return broken
        proc = self._proc
        if proc is None or proc.poll() is None or self._events:
            return None
        if self._reader is not None:
            self._reader.join(timeout=1.0)  # its last words may still be in the pipe
        return self._error or self._died(" while the run went on")

    def _died(self, later: str = "") -> str:
        """How the monitor process ended, and when: ``later`` once it was ready."""
        assert self._proc is not None
        return _ended(self._proc.returncode) + (later if self._ready else " while it started")

    def let_signals_in(self, during: Mapping[int, Any] | None = None) -> None:
        """The run can end on Ctrl-C or SIGTERM from now on (``during``: their handlers while it
        goes on, by signal; else those before it): one that came while the monitor started is
        handled now (``KeyboardInterrupt`` raised here), as is one whose interruption was lost
        on its way before (``heldsignals.dropped``)."""
        self.signals.let_in(during, start=True)

    def hold_signals(self) -> None:
        """The run is ending: Ctrl-C and SIGTERM end nothing more (they are counted)."""
        self.signals.hold()

    def finish(self, stage: str | None) -> RunResult:
        """Wait for the monitor to finish the run file (after the application sent FINISH)."""
        opts = self.opts
        if not self._told:  # (the run broke off before it could say how it ended)
            self.hold_signals()
            self.control.close()  # the monitor finishes the file as failed when it sees that
        if self._inline is not None:
            final = self._inline.join()
            if opts.out and self.store is not None:
                self.store.close()
            if final is None:
                return RunResult(
                    RunStatus.FAILED, "the monitor thread broke", opts.out, self.store, stage
                )
            return RunResult(
                final.status, final.error, opts.out, self.store, stage, {"events": final.events}
            )
        proc = self._proc
        assert proc is not None
        while True:
            try:
                proc.wait()
                if self._reader is not None:
                    self._reader.join()
                break
            except KeyboardInterrupt:
                continue  # the monitor is finishing the file; a second Ctrl-C must not lose it
        done = [ev for ev in self._events if ev["event"] == "done"]
        if not done:
            status, error = self._finish_failed(self._error or self._died())
            return RunResult(status, error, opts.out, None, stage)
        d = done[-1]
        extra: dict[str, Any] = {"events": d.get("events", 0)}
        for said in (ev for ev in self._events if ev["event"] == "said"):
            extra["said"] = (str(said.get("summary", "")), str(said.get("findings", "")))
        return RunResult(d["status"], d.get("error"), opts.out, None, stage, extra)

    def _finish_failed(self, error: str) -> tuple[RunStatus, str | None]:
        """The monitor died before it finished the run file (``error``: how): finished here
        (``runtime.unfinished``); how the run ended, and why."""
        out, lock = self.opts.out, self.lock
        if out is None or lock is None or lock.fd is None:
            return RunStatus.FAILED, error
        from streamscope.runtime.unfinished import monitor_died  # loads DuckDB: only now

        return monitor_died(out, self._about, error, lock_fd=lock.fd,
                            overwrite=self.opts.overwrite, t0_ticks=self._t0)  # fmt: skip

    def cleanup(self) -> None:
        """Remove the run's private directory (rings, socket) and let go of the run file,
        whatever happened; Ctrl-C and SIGTERM are handled as before the run."""
        close_journal()
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.lock is not None:
            self.lock.release()
        self.signals.release()

    @property
    def path(self) -> Path:
        return Path(self.dir)


def _ended(code: int | None) -> str:
    """How the monitor process ended, in words."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"the monitor process was killed ({name})"
    return f"the monitor process exited with code {code}"
