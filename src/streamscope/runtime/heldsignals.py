"""Ctrl-C (SIGINT) and SIGTERM held back while a run is at a step they must not cut short, and
none of them lost on its way.

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

``streamscope run`` has them interrupt it from its first instant (``interrupting``), where an
interruption can be lost: Python drops an exception raised where none can propagate (a
finalizer, a weakref's callback: the import system lets go of each module's lock through one,
after every import) and goes on, as it goes on after a bare ``except:`` that caught it (a
library's, an app's own code); the command then went on to start a program that the signal,
come before it, never reached, and waited for it for ever. Each signal they raise for is kept
until a step of the run that ends on it asks (``dropped``): where the run takes its file
(``hold``), where it can end on a signal (``let_in``), before its program starts and while its
pipeline runs (``handle_dropped``); by then one that ended something ended the command, so one
still kept was lost, and the run ends on it there.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Mapping
from typing import Any

from streamscope.core.process import SignalInterrupt

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

    def hold(self, *, start: bool = False) -> None:
        """Keep them from now on (their handlers before the run saved the first time).
        ``start``: the run takes its file here; a signal whose interruption was lost on its
        way is handled first, by the handlers in place (``handle_dropped``)."""
        if self._holding or threading.current_thread() is not threading.main_thread():
            return
        if start:
            handle_dropped()
        if self._outer is None:
            self._outer = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
        for sig in INTERRUPTS:
            signal.signal(sig, self._keep)
        self._holding = True

    def let_in(self, during: Mapping[int, Any] | None = None, *, start: bool = False) -> None:
        """Their handlers as before the run, or those ``during`` gives for the run (by signal;
        ``release`` puts back those before it); each signal that came while they were held is
        handled by them now, once (Ctrl-C's raises ``KeyboardInterrupt`` here). ``start``: the
        run can end on a signal from here on; so is one whose interruption was lost on its way
        (``dropped``)."""
        if not self._holding:
            return
        self._restore()
        for sig, handler in (during or {}).items():
            signal.signal(sig, handler)
        came, self._came = [*self._came, *(dropped() if start else ())], []
        for sig in dict.fromkeys(came):
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


#: The signals whose handlers raised an interruption (``interrupt``; any dropped by Python,
#: ``interrupting``) that no step of a run has asked for yet (``dropped``): process-wide, as
#: signal handlers are; a process forked from this one starts with none.
_raised: list[int] = []
os.register_at_fork(after_in_child=_raised.clear)


def interrupt(signum: int, frame: object) -> None:
    """``streamscope run``'s handler of Ctrl-C and SIGTERM (``interrupting``): the signal as
    ``SignalInterrupt``, kept for ``dropped``."""
    _raised.append(signum)
    raise SignalInterrupt(signum)


def interrupting() -> None:
    """From now on Ctrl-C and SIGTERM interrupt this process (``interrupt``; one that its
    parent had it ignore stays ignored), and an interruption that Python drops in its main
    thread, raised in a finalizer or a weakref's callback, is kept for ``dropped`` instead of
    said to be ignored. ``streamscope run``, from its first instant (``cli.entry``)."""
    main = threading.main_thread().ident
    for sig in INTERRUPTS:
        if signal.getsignal(sig) is not signal.SIG_IGN:
            signal.signal(sig, interrupt)
    said = sys.unraisablehook

    def kept(unraisable: Any) -> None:
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt) and threading.get_ident() == main:
            # (raised again from here, its handler would run in this hook, and be dropped)
            _raised.append(getattr(exc, "signum", signal.SIGINT))
        else:
            said(unraisable)

    sys.unraisablehook = kept


def dropped() -> list[int]:
    """The signals whose interruption was raised or dropped since last asked (``_raised``),
    each once, forgotten now: asked where an interruption that ended something would have
    ended the command already, so each was lost on its way, and the run ends on it there."""
    came = list(dict.fromkeys(_raised))
    _raised.clear()
    return came


def handle_dropped() -> None:
    """Each signal whose interruption was lost on its way (``dropped``) handled now by its
    handler in place, as if it came now (an interruption raised here)."""
    for sig in dropped():
        _handle(sig, signal.getsignal(sig))


def _handle(sig: int, handler: Any) -> None:
    """What ``handler`` (as ``signal.getsignal`` gives it) does with ``sig``."""
    if callable(handler):
        handler(sig, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(sig)  # its default action: as if it came now


__all__ = [
    "INTERRUPTS",
    "HeldSignals",
    "dropped",
    "handle_dropped",
    "interrupt",
    "interrupting",
]
