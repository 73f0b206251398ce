"""A channel between stages on two hosts: a bounded FIFO carried by the cluster, with an end.

In: items put by a stage on one host. Out: the same items, in order, got by a stage on another
host, then the end of the stream. The queue is an actor on the consumer's host (``ray.util``'s
bounded queue): a put waits while ``capacity`` items are in it, so the channel's capacity holds
across the network, and items travel by value in the calls (small stream items cost one call
each; a large one may be put as an object reference instead, which the consumer resolves).
"""

from __future__ import annotations

from typing import Any

from streamscope.runtime.hosts.cluster import RayCluster


class EndOfStream:
    """What a channel gives after its last item (compared by type: it crosses processes)."""


class HostChannel:
    """A channel of ``capacity`` items whose queue lives on ``host`` (the consumer's); it can be
    handed to the stages' actors on any host."""

    def __init__(self, cluster: RayCluster, capacity: int, host: str | None) -> None:
        """``host`` None: the queue lives on this process's own node."""
        if capacity < 1:
            raise ValueError(f"a channel holds at least one item, not {capacity}")
        from ray.util.queue import Queue

        self.capacity = capacity
        where = cluster.on_node(host) if host is not None else cluster.on_this_node()
        self._q: Any = Queue(maxsize=capacity, actor_options=where)

    def put(self, item: Any) -> None:
        """Put ``item``, waiting while the channel is full."""
        self._q.put(item, block=True)

    def send(self, item: Any) -> Any:
        """Put ``item`` without waiting for the call: a reference that resolves once it is in
        (calls from one caller arrive in the order made; the caller bounds how many are on
        the way, below the capacity, for the queue never to be full)."""
        return self._q.actor.put.remote(item)

    def close(self) -> None:
        """The producer is done: the consumer gets ``EndOfStream`` after the last item."""
        self._q.put(EndOfStream(), block=True)

    def get(self) -> Any:
        """The next item, waiting while the channel is empty; ``EndOfStream`` at the end."""
        return self._q.get(block=True)

    def get_within(self, timeout_s: float) -> tuple[bool, Any]:
        """``(True, item)``, or ``(False, None)`` when nothing came within ``timeout_s``."""
        from ray.util.queue import Empty

        try:
            return True, self._q.get(block=True, timeout=timeout_s)
        except Empty:
            return False, None

    def ready(self) -> Any:
        """A reference that resolves once the queue's actor answers."""
        return self._q.actor.qsize.remote()

    def qsize(self) -> int:
        return int(self._q.qsize())

    def shutdown(self) -> None:
        """Let go of the queue's actor, at once: a graceful end waits behind the calls still
        queued there (a consumer's wait for an item), seconds that a run that stops must not
        take."""
        self._q.shutdown(force=True)
