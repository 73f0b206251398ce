"""The agents a monitor hears from, and how far each has promised its records.

In: agents' HELLO, BATCH, SUMMARY and END messages (their clock domain, whether they send data,
their watermarks in virtual ns) and links that close. Out: the watermarks frames wait for: those
of the sources still sending, or the last of those that are done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from streamscope.core.topology import HOST
from streamscope.transport.wire import WATERMARK_END


@dataclass(slots=True)
class AgentState:
    """One agent as the monitor knows it (mutable: its watermark moves)."""

    watermark_ns: int = 0
    #: The same watermark as the latest fit places it, past the clock's bracket too: how far
    #: provisional frames (a live view) may go.
    shown_ns: int = 0
    ended: bool = False
    domain: str = HOST
    #: It sends records or summaries (a device's agent): frames wait for its watermark.
    data: bool = False


class Agents(dict[int, AgentState]):
    """Every agent heard from, by agent id."""

    def of(self, agent: int) -> AgentState:
        """Agent ``agent``'s state (a new one if it was not heard from before)."""
        return self.setdefault(agent, AgentState())

    def hello(self, agent: int, info: dict[str, Any]) -> None:
        state = self.of(agent)
        state.domain = str(info.get("domain", HOST))
        state.data = bool(info.get("data", False))

    def disconnect(self, agent: int) -> None:
        """The agent's link closed: it will send nothing more."""
        if agent in self:
            self[agent].ended = True

    def live_marks(self, ring_watermark_ns: int | None, *, shown: bool = False) -> list[int]:
        """The watermarks of the sources still sending: live data agents and the rings
        (``shown``: the agents' as the latest fits place them, for provisional frames)."""
        live = [
            max(a.shown_ns, a.watermark_ns) if shown else a.watermark_ns
            for a in self.values()
            if a.data and not a.ended
        ]
        if ring_watermark_ns is not None:
            live.append(ring_watermark_ns)
        return live

    def done_mark(self) -> int | None:
        """With no source still sending: the furthest watermark of the data agents done."""
        done = [a.watermark_ns for a in self.values() if a.data and a.watermark_ns < WATERMARK_END]
        return max(done) if done else None
