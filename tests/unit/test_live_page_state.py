"""The live page's state, without a server: frames in, events and the report out."""

from __future__ import annotations

import asyncio

from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.core.topology import ChannelInfo, ResourceInfo, StageInfo, Topology
from streamscope.report.live import LivePage
from streamscope.runtime.options import RunOptions, make_meta
from streamscope.store.writer import QueryRecord

TOPO = Topology(
    "t",
    resources=(ResourceInfo("main", "thread"),),
    stages=(StageInfo("a", "main", "source"), StageInfo("b", "main", "sink")),
    channels=(ChannelInfo("a -> b", "a", "b", 4),),
)
QUERY = QueryRecord(0, "occupancy(a -> b): mean", "occupancy", "items", 100_000_000, ("a -> b",),
                    ("mean",))  # fmt: skip


def frame(k: int, provisional: bool = False) -> FrameResult:
    return FrameResult(
        0, "a -> b", k, k * 100_000_000, (k + 1) * 100_000_000, 100_000_000,
        (ScalarPoint("mean", 2.0 + k),), provisional=provisional,
    )  # fmt: skip


def test_frames_become_events_and_the_report_then_the_end() -> None:
    page = LivePage(make_meta("t", RunOptions(frame_ns=100_000_000)), TOPO, [QUERY])
    page.on_frames([frame(0), frame(1)], [])
    page.on_frames([frame(2, provisional=True)], [])  # not final: not shown
    assert (page.frames, page.version) == (2, 1)
    html = page.report()
    assert 'id="findings"' in html
    assert "a -&gt; b" in html
    page.finish("completed", None, 250_000_000)

    async def take() -> list[str]:
        return [e async for e in page.events()]

    events = asyncio.run(take())
    assert events == ['event: end\ndata: {"version": 2, "frames": 2, "status": "completed"}\n\n']
    assert page.report() != html  # rendered again for the end
