"""The live view: final frames printed as they close; provisional ones marked, then replaced."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.report.terminal import PROVISIONAL, LiveView
from streamscope.runtime.session import prepare


def _view(terminal: bool) -> tuple[LiveView, io.StringIO]:
    p = Pipeline("t")
    p.add("a", range(3))
    p.add("b", lambda x: x)
    p.connect("a", "b", capacity=4)
    plan, _ = prepare(p, ["latency(a -> b): mean every 100ms"], 100_000_000)
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=terminal, width=200, color_system=None)
    return LiveView(plan, console), buf


def _frame(k: int, mean: float, provisional: bool = False) -> FrameResult:
    t = k * 100_000_000
    return FrameResult(
        0, "a -> b", k, t, t + 100_000_000, 100_000_000,
        (ScalarPoint("mean", mean),), provisional,
    )  # fmt: skip


def test_printed_lines_mark_provisional_frames_once_and_print_the_final_ones() -> None:
    view, buf = _view(terminal=False)
    with view:
        view.on_frames([_frame(0, 1e6)], [])
        view.on_frames([_frame(1, 2e6, True), _frame(2, 3e6, True)], [])
        view.on_frames([_frame(1, 2e6, True), _frame(2, 3e6, True)], [])  # shown again: once
        view.on_frames([_frame(1, 2.5e6), _frame(2, 3.5e6)], [])
    lines = buf.getvalue().splitlines()
    assert len(lines) == 5, lines
    assert [PROVISIONAL in line for line in lines] == [False, True, True, False, False]
    assert "2.5ms" in lines[3] and "3.5ms" in lines[4]


def test_the_table_shows_a_waiting_frame_until_its_final_one_comes() -> None:
    view, _ = _view(terminal=True)
    view.on_frames([_frame(0, 1e6)], [])
    view.on_frames([_frame(3, 2e6, True)], [])
    assert view.waiting and PROVISIONAL in _rendered(view)
    view.on_frames([_frame(2, 2e6)], [])  # an older final frame: the newer one still waits
    assert PROVISIONAL in _rendered(view)
    view.on_frames([_frame(3, 2e6)], [])
    assert not view.waiting and PROVISIONAL not in _rendered(view)


def _rendered(view: LiveView) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, color_system=None).print(view._table())
    return buf.getvalue()


def test_the_python_api_and_the_drop_in_show_the_live_view_when_asked(
    capfd: pytest.CaptureFixture[str],
) -> None:
    import streamscope as ss

    p = Pipeline("live")
    p.add("src", range(300))
    p.add("sink", lambda x: None)
    p.chain("src", "sink", capacity=4)
    opts = ss.RunOptions(mode="inline", frame_ns=100_000_000)
    ss.run(p, ["throughput(src -> sink): mean"], opts)
    assert capfd.readouterr().err == ""  # not asked: nothing shown
    ss.run(p, ["throughput(src -> sink): mean"], opts, live=True)
    err = capfd.readouterr().err
    assert "q0 src -> sink: mean=" in err
    q = ss.Queue(4, src="live_a", dst="live_b")
    with ss.monitor(["throughput(live_a -> live_b): mean"], opts, live=True):
        for i in range(50):
            q.put(i)
            q.get()
    assert "q0 live_a -> live_b: mean=" in capfd.readouterr().err
