"""A device's agent: its batches and the watermark each carries, with and without a writer that
stores records late holding it back."""

from __future__ import annotations

import queue

from streamscope.agents.ship import Agent
from streamscope.core.records import Kind
from streamscope.probes.taps import Recorder
from streamscope.transport.channels import InMemoryTransport
from streamscope.transport.control import Control
from streamscope.transport.wire import Message, MsgType, decode


class Ticks:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.t = 1000

    def __call__(self) -> int:
        return self.t


def _sent(inbox: queue.Queue[bytes | None]) -> list[Message]:
    out = []
    while not inbox.empty():
        item = inbox.get()
        if item is not None:
            out.append(decode(item))
    return out


def test_each_flush_promises_the_start_of_the_flush_before() -> None:
    inbox: queue.Queue[bytes | None] = queue.Queue()
    clock = Ticks()
    agent = Agent(Control(InMemoryTransport(inbox), 7), clock)
    tap = Recorder().tap(3, Kind.SAMPLE, capacity=16, publish=False)
    agent.add(tap)
    tap.ring.record_at(1500, 1)
    clock.t = 2000
    agent.flush()
    clock.t = 3000
    agent.flush()
    hello, first, second = _sent(inbox)
    assert hello.type == MsgType.HELLO and hello.info["data"] is True
    assert (first.type, first.watermark, len(first.records)) == (MsgType.BATCH, 1000, 1)
    assert (second.watermark, len(second.records)) == (2000, 0)


def test_a_writer_that_stores_late_holds_the_watermark_back() -> None:
    """A storage core read over a link stores samples long after their ticks: the watermark
    waits for the oldest it still holds, then moves on when it holds none."""
    inbox: queue.Queue[bytes | None] = queue.Queue()
    clock = Ticks()
    agent = Agent(Control(InMemoryTransport(inbox), 7), clock)
    held: list[int] = [1200]
    agent.hold(lambda: min(held) if held else None)
    for t in (2000, 3000):
        clock.t = t
        agent.flush()
    held.clear()
    clock.t = 4000
    agent.flush()
    marks = [m.watermark for m in _sent(inbox) if m.type == MsgType.BATCH]
    assert marks == [1000, 1200, 3000]
    agent.close()
    assert _sent(inbox)[-1].type == MsgType.END
