"""Ctrl-C and SIGTERM held back while a run starts its monitor and while it ends
(``runtime.heldsignals``): one that comes then is handled where the run can end on it, or only
counted once it is ending; their handlers are the process's own again once the run is over.
One whose interruption Python drops, or something catches, is handled at the run's next step."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import weakref
from collections.abc import Iterator

import pytest

from streamscope.core.process import SignalInterrupt
from streamscope.runtime import heldsignals
from streamscope.runtime.heldsignals import INTERRUPTS, HeldSignals


def _interrupt(signum: int, frame: object) -> None:
    raise SignalInterrupt(signum)


@pytest.fixture
def handlers() -> Iterator[None]:
    """The process's handlers, as ``streamscope run`` makes them; put back after."""
    saved = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    for sig in INTERRUPTS:
        signal.signal(sig, _interrupt)
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


@pytest.mark.usefixtures("handlers")
@pytest.mark.parametrize("sig", INTERRUPTS, ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_held_is_handled_when_let_in(sig: signal.Signals) -> None:
    held = HeldSignals()
    held.hold()
    signal.raise_signal(sig)  # its handler runs before this returns: it is kept
    with pytest.raises(SignalInterrupt) as got:
        held.let_in()
    assert got.value.signum == sig
    assert all(signal.getsignal(s) is _interrupt for s in INTERRUPTS)
    held.release()
    assert held.late == []


@pytest.mark.usefixtures("handlers")
def test_a_signal_while_the_run_ends_is_only_counted() -> None:
    held = HeldSignals()
    held.hold()
    held.let_in()  # none came: nothing raised
    held.hold()  # the run ends
    signal.raise_signal(signal.SIGTERM)
    signal.raise_signal(signal.SIGINT)
    held.release()
    assert held.late == [signal.SIGTERM, signal.SIGINT]
    assert all(signal.getsignal(s) is _interrupt for s in INTERRUPTS)


@pytest.mark.usefixtures("handlers")
def test_handlers_for_the_run_are_the_processs_own_again_after_it() -> None:
    """``let_in(during)``: SIGTERM interrupts a pipeline's run with its own handler; a
    SIGTERM that came while the monitor started is handled by it; after the run, the
    process's handler is back."""
    got: list[int] = []

    def during(signum: int, frame: object) -> None:
        got.append(signum)

    held = HeldSignals()
    held.hold()
    signal.raise_signal(signal.SIGTERM)
    held.let_in({signal.SIGTERM: during})
    assert got == [signal.SIGTERM]
    assert signal.getsignal(signal.SIGTERM) is during
    held.hold()
    held.release()
    assert signal.getsignal(signal.SIGTERM) is _interrupt


@pytest.mark.usefixtures("handlers")
def test_nothing_is_held_from_another_thread() -> None:
    """Signals are the main thread's: a run driven from another thread holds nothing (and
    changes no handler)."""
    held = HeldSignals()
    thread = threading.Thread(target=held.hold)
    thread.start()
    thread.join()
    assert all(signal.getsignal(s) is _interrupt for s in INTERRUPTS)
    held.let_in()
    held.release()
    assert all(signal.getsignal(s) is _interrupt for s in INTERRUPTS)


@pytest.fixture
def command() -> Iterator[list[object]]:
    """The process's handlers as ``streamscope run`` makes them (``interrupting``), and what
    is said to be ignored meanwhile; all put back after."""
    saved = {sig: signal.getsignal(sig) for sig in INTERRUPTS}
    hook = sys.unraisablehook
    said: list[object] = []
    sys.unraisablehook = said.append
    heldsignals.interrupting()
    try:
        yield said
    finally:
        sys.unraisablehook = hook
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        heldsignals.dropped()


def _in_a_weakref_callback(sig: signal.Signals) -> None:
    """``sig`` comes while a weakref's callback runs: Python drops what its handler raises."""

    class Gone:
        pass

    gone = Gone()
    ref = weakref.ref(gone, lambda ref: signal.raise_signal(sig))
    del gone
    assert ref() is None


def test_an_interruption_python_drops_is_handled_where_the_run_takes_its_file(
    command: list[object],
) -> None:
    _in_a_weakref_callback(signal.SIGTERM)  # nothing raised: dropped
    assert command == []  # nor said to be ignored
    held = HeldSignals()
    with pytest.raises(SignalInterrupt) as got:
        held.hold(start=True)
    assert got.value.signum == signal.SIGTERM
    assert all(signal.getsignal(s) is heldsignals.interrupt for s in INTERRUPTS)  # not held
    assert heldsignals.dropped() == [signal.SIGTERM]  # (raised again here: kept anew)


@pytest.mark.usefixtures("command")
@pytest.mark.parametrize("sig", INTERRUPTS, ids=["SIGINT", "SIGTERM"])
def test_one_caught_is_handled_where_the_run_can_end_on_signals(sig: signal.Signals) -> None:
    held = HeldSignals()
    held.hold()
    with contextlib.suppress(BaseException):  # (as a bare ``except:`` catches it)
        heldsignals.interrupt(sig, None)
    with pytest.raises(SignalInterrupt) as got:
        held.let_in(start=True)
    assert got.value.signum == sig
    held.release()
    assert held.late == []


@pytest.mark.usefixtures("command")
def test_one_dropped_is_told_once_before_a_program_starts() -> None:
    """``dropped``: each signal once (a program's run is then interrupted before it starts),
    whatever handler raised it; forgotten once told."""

    def during(signum: int, frame: object) -> None:
        raise SignalInterrupt(signum)  # a pipeline's SIGTERM (``runtime.session``)

    signal.signal(signal.SIGTERM, during)
    _in_a_weakref_callback(signal.SIGINT)
    _in_a_weakref_callback(signal.SIGTERM)
    _in_a_weakref_callback(signal.SIGINT)
    assert heldsignals.dropped() == [signal.SIGINT, signal.SIGTERM]
    assert heldsignals.dropped() == []
    heldsignals.handle_dropped()  # none: nothing raised


def test_other_unraisable_exceptions_are_said_as_before(command: list[object]) -> None:
    class Broken:
        def __del__(self) -> None:
            raise ValueError("broken")

    Broken()
    assert [type(u.exc_value) for u in command] == [ValueError]  # type: ignore[attr-defined]
    assert heldsignals.dropped() == []
