"""The monitor's side of a cluster's hosts: a collector on the monitor's own node that writes
every host agent's messages to the monitor, in the order each agent sent them, and the agents'
transport to it.

In: the monitor's socket; each agent's encoded messages, as calls. Out: one connection to the
monitor per agent; per agent, the messages and bytes it sent over the network.
"""

from __future__ import annotations

import contextlib
from collections import deque
from typing import Any

from streamscope.transport.channels import UnixSocketTransport

#: Messages an agent may have on the way to the collector before it waits for the oldest.
IN_FLIGHT_MESSAGES = 32


class Collector:
    """On the monitor's node: one connection to the monitor per host agent, each agent's
    messages written to it in the order it sent them (an actor)."""

    def __init__(self, socket_path: str) -> None:
        self.path = socket_path
        self.links: dict[int, UnixSocketTransport] = {}
        #: Per agent: messages and bytes it sent over the network.
        self.sent: dict[int, list[int]] = {}

    def send(self, agent_id: int, data: bytes) -> None:
        link = self.links.get(agent_id)
        if link is None:
            link = self.links[agent_id] = UnixSocketTransport(self.path)
        link.send(data)
        got = self.sent.setdefault(agent_id, [0, 0])
        got[0] += 1
        got[1] += len(data)

    def counts(self) -> dict[int, list[int]]:
        return self.sent

    def close(self, agent_id: int) -> None:
        link = self.links.pop(agent_id, None)
        if link is not None:
            link.close()

    def close_all(self) -> None:
        for agent_id in list(self.links):
            self.close(agent_id)


class CollectorTransport:
    """A host agent's link to the monitor: its messages as calls to the collector, a few on
    the way at once (calls from one caller to one actor run in the order they were made)."""

    def __init__(self, collector: Any, agent_id: int) -> None:
        import ray

        self._ray = ray
        self._collector = collector
        self._agent_id = agent_id
        self._pending: deque[Any] = deque()

    def send(self, data: bytes) -> None:
        self._pending.append(self._collector.send.remote(self._agent_id, data))
        if len(self._pending) > IN_FLIGHT_MESSAGES:
            self._ray.get(self._pending.popleft())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.get(list(self._pending))
            self._ray.get(self._collector.close.remote(self._agent_id))
        self._pending.clear()
