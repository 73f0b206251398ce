"""A process started ahead (``core.ahead``): let go, it ends by itself; dead before it is
handed its work, the hand-over says so (the monitor's launch then starts one anew)."""

from __future__ import annotations

import pytest

from streamscope.core import ahead

MONITOR = "streamscope.monitor"


def test_one_let_go_ends_by_itself() -> None:
    ahead.start(MONITOR)
    waiting = ahead.take(MONITOR)
    assert waiting is not None and ahead.take(MONITOR) is None  # taken once
    waiting.drop()
    assert waiting.proc.wait(timeout=60) == 0


def test_one_that_died_cannot_be_handed_its_work() -> None:
    ahead.start(MONITOR)
    waiting = ahead.take(MONITOR)
    assert waiting is not None
    waiting.proc.kill()
    waiting.proc.wait(timeout=60)
    with pytest.raises(BrokenPipeError):
        waiting.hand("config.json", ())
