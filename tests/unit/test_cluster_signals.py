"""A SIGTERM while a cluster starts (``runtime.hosts.nodeprocs.sigterm_kept``): it interrupts as
Ctrl-C does, and one whose interrupt Python ignored (raised inside a fork's callback, where
exceptions are only printed) is acted on at the next check, not lost."""

from __future__ import annotations

import contextlib
import os
import signal
import types

import pytest

from streamscope.runtime.hosts.nodeprocs import check_interrupted, sigterm_kept

RAY = types.SimpleNamespace()  # no Ray handler to keep out


def test_a_sigterm_interrupts_the_block() -> None:
    with pytest.raises(KeyboardInterrupt), sigterm_kept(RAY):  # type: ignore[arg-type]
        signal.raise_signal(signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # put back
    check_interrupted()  # acted on: nothing left to raise


def test_a_sigterm_whose_interrupt_was_ignored_interrupts_at_the_next_check() -> None:
    with sigterm_kept(RAY):  # type: ignore[arg-type]
        # as Python runs a fork's callbacks: their exceptions are printed, not raised
        with contextlib.suppress(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            check_interrupted()
        check_interrupted()  # once


def test_a_sigterm_ignored_at_the_end_of_the_block_interrupts_as_it_ends() -> None:
    with (
        pytest.raises(KeyboardInterrupt),
        sigterm_kept(RAY),  # type: ignore[arg-type]
        contextlib.suppress(KeyboardInterrupt),  # its interrupt ignored, at the block's end
    ):
        os.kill(os.getpid(), signal.SIGTERM)
