"""Ctrl-C (SIGINT) and SIGTERM held back while a run is at a step they must not cut short.

In: when a run starts its monitor (``hold``), when it can end on a signal (``let_in``), when it
tells its end and finishes its file (``hold`` again) and when it is over (``release``). Out:
the process's handlers of the two signals, as they were before the run once it is over; a
signal that came while they were held back is handled by them when they are let in (Ctrl-C's
``KeyboardInterrupt`` raised there, where the run ends on it), and only counted (``late``) when
it came while the run was ending anyway.

A handler of Python's runs in the main thread, whichever thread got the signal: they are held
back there, by a handler that keeps them, not by the threads' signal masks (the command's other
threads would take a blocked signal, and its handler would run all the same). Elsewhere (a run
driven from another thread) nothing is held: signals are the main thread's.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Mapping
from typing import Any

#: The signals a run ends on (as an interruption); the others of a run's process group pass
#: by as before.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM)


class HeldSignals:
    """The two signals of one run, held back or let in (see the module's docstring)."""

    def __init__(self) -> None:
        #: Their handlers before the run (None: not saved yet, or given back).
        self._outer: dict[int, Any] | None = None
        self._holding = False
        self._came: list[int] = []
        #: Signals that came while the run was ending, and ended nothing.
        self.late: list[int] = []

    def hold(self) -> None:
        """Keep them from now on (their handlers before the run saved the first time)."""
        if self._holding or threading.current_thread() is not threading.main_thread():
            return
        if self._outer is None:
            self._outer = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
        for sig in INTERRUPTS:
            signal.signal(sig, self._keep)
        self._holding = True

    def let_in(self, during: Mapping[int, Any] | None = None) -> None:
        """Their handlers as before the run, or those ``during`` gives for the run (by signal;
        ``release`` puts back those before it); each signal that came while they were held is
        handled by them now, once (Ctrl-C's raises ``KeyboardInterrupt`` here)."""
        if not self._holding:
            return
        self._restore()
        for sig, handler in (during or {}).items():
            signal.signal(sig, handler)
        came, self._came = list(dict.fromkeys(self._came)), []
        for sig in came:
            _handle(sig, signal.getsignal(sig))

    def release(self) -> None:
        """The run is over: their handlers as before it, for good; what came while they were
        held is only counted in ``late`` (the run had ended on something else)."""
        self.late.extend(self._came)
        self._came = []
        if self._outer is not None:
            self._restore()
            self._outer = None

    def _keep(self, signum: int, frame: object) -> None:
        self._came.append(signum)

    def _restore(self) -> None:
        assert self._outer is not None
        for sig, handler in self._outer.items():
            signal.signal(sig, handler)
        self._holding = False


def _handle(sig: int, handler: Any) -> None:
    """What ``handler`` (as ``signal.getsignal`` gives it) does with ``sig``."""
    if callable(handler):
        handler(sig, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(sig)  # its default action: as if it came now


__all__ = ["INTERRUPTS", "HeldSignals"]
