"""A channel between hosts of a cluster: a buffer at each end, tapped as a device link's are,
and the network between them (a bounded queue on the consumer's host, ``channel.HostChannel``).

In: the link's spec and its network queue. Out: a ``LinkChannel`` that travels to the hosts'
workers by pickling, each side making its own buffers there.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Any

from streamscope.core.stream import EOS
from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.describe.resources import LinkSpec
from streamscope.runtime.hosts.channel import EndOfStream, HostChannel

#: The most batches a link between hosts has on the way (its network queue's capacity).
MAX_IN_FLIGHT = 64


class NetworkBus:
    """The middle of a link between hosts: a bounded queue of batches on the consumer's host,
    which the sending side's mover fills and the receiving side's receiver empties (the
    ``bus`` of a ``LinkChannel``)."""

    def __init__(self, channel: HostChannel) -> None:
        self.channel = channel

    def put(self, msg: Any) -> None:
        self.channel.put(EndOfStream() if msg is EOS else msg)

    def get_within(self, timeout_s: float) -> tuple[bool, Any]:
        got, msg = self.channel.get_within(timeout_s)
        return got, (EOS if isinstance(msg, EndOfStream) else msg)


def in_flight_for(link: LinkSpec) -> int:
    """Batches on the way at once on ``link``: its latency's worth of transfers, and two."""
    per = max(link.transfer_ns, 1.0)
    return int(min(MAX_IN_FLIGHT, math.ceil(link.latency_ns / per) + 2))


class HostLink(LinkChannel):
    """A channel between two hosts (or a host and the pipeline's own process): a buffer at
    each end, tapped as a device link's are, and the network between them. It travels to the
    hosts' workers by pickling; each side makes its own buffers there."""

    def __init__(
        self,
        name: str,
        capacity: int,
        link: LinkSpec,
        bus: NetworkBus,
        ground_truth: bool,
        stamped: bool = False,
    ) -> None:
        self._fresh(name, capacity, link, bus, ground_truth)
        if stamped:
            self.stamp()

    def _fresh(
        self, name: str, capacity: int, link: LinkSpec, bus: NetworkBus, ground_truth: bool
    ) -> None:
        import dataclasses

        from streamscope.pipeline.channels.fifo import ThreadChannel

        self.name = name
        self.capacity = capacity
        self.link = dataclasses.replace(link, bulk_size=min(link.bulk_size, capacity))
        self.tail_buf = ThreadChannel(capacity, name=f"{name} [tail buffer]")
        self.tail_buf.watch_idle()
        self.head_buf = ThreadChannel(capacity, name=f"{name} [head buffer]")
        self.ground_truth = ground_truth
        if ground_truth:
            self.tail_buf.keep_truth("put")
            self.head_buf.keep_truth("get")
        self.bus = bus  # type: ignore[assignment]  # a network queue, not shared memory
        self.network: NetworkBus = bus
        self.transfers = 0
        self._stamps: list[int] = []
        self.late = 0  #: batches that arrived after their time (the network was slower)
        self.late_ns = 0  #: by how much, in all
        #: Batches a sender has on the way at most: enough for the latency's worth of
        #: transfers (the model lets them overlap), within the network queue's capacity.
        self.in_flight = in_flight_for(self.link)
        #: Each batch carries the ticks its items' producer tap read as they went in (the
        #: consumer's host pairs them with their removals: the link's latency, reduced there).
        self.stamped = False
        #: Items carry path tags in the batches (``latency(SRC ~> DST)`` through this link).
        self.tagged = False
        self._sent_items = 0
        #: Where the consumer's side hands each batch's (first item's number, stamps): its
        #: host's own frames (``agents.host``); None: nobody pairs them.
        self.on_stamps: Any = None

    def stamp(self) -> None:
        """Carry the insertion ticks with the items (before the first item is put)."""
        self.stamped = True
        self.tail_buf.keep_stamps()

    def next_batch(self) -> tuple[list[Any], bool]:
        items, _, ended = self._batch()
        return items, ended

    def _batch(self) -> tuple[list[Any], list[int] | None, bool]:
        """The next transfer's items, their path tags where they carry them (``tagged``), and
        whether the stream ended; their insertion ticks kept for the message (``stamped``)."""
        if not self.stamped:
            return self._next(self.tagged)
        m = self.tail_buf.wait_batch(self.link.bulk_size, self.link.timeout_ns / 1e9)
        tags: list[int] | None = None
        if self.tagged:
            batch, stamps, tags = self.tail_buf.take_stamped_tagged(m)
        else:
            batch, stamps = self.tail_buf.take_stamped(m)
        ended = bool(batch) and batch[-1] is EOS
        if ended:
            batch, stamps = batch[:-1], stamps[:-1]
            tags = tags[:-1] if tags is not None else None
        self._stamps = stamps
        return batch, tags, ended

    def mover(self) -> None:
        """The sending side: a batch goes out in a call as it is taken from the buffer, without
        waiting for the call (at most ``in_flight`` on the way); the next may start
        ``transfer`` after it, and it is delivered ``latency`` after that. The link then
        behaves as the model that estimates it assumes, whatever the network's own timing
        below it; a batch that arrives after its time is counted (``late``)."""
        ray = self._ray()
        transfer_ns = int(self.link.transfer_ns)
        on_the_way: deque[Any] = deque()
        while True:
            items, tags, ended = self._batch()
            if items:
                start = time.monotonic_ns()
                due = start + transfer_ns + int(self.link.latency_ns)
                stamped = None
                if self.stamped:
                    stamped = (self._sent_items + 1, self._stamps)
                    self._sent_items += len(items)
                # The items' path tags ride with them (none: not one of them carries a tag).
                msg = (self.transfers, due, items, stamped, tags if tags and any(tags) else None)
                on_the_way.append(self.network.channel.send(msg))
                if len(on_the_way) >= self.in_flight:
                    ray.get(on_the_way.popleft())
                self.transfers += 1
                while (left := start + transfer_ns - time.monotonic_ns()) > 0:
                    time.sleep(left / 1e9)
            if ended:
                ray.get(list(on_the_way))
                self.bus.put(EOS)
                return

    def receiver(self) -> None:
        """The receiving side: each batch into the head buffer at its time (or as it comes,
        late), in the order sent (calls on the way at once may arrive in another)."""
        early: dict[int, tuple[Any, ...]] = {}
        expect = 0
        for n, *rest in self.arrivals():  # the end is sent once every batch was in
            early[n] = tuple(rest)
            while expect in early:
                self._deliver(*early.pop(expect))
                expect += 1

    def _deliver(
        self,
        due: int,
        items: list[Any],
        stamped: tuple[int, list[int]] | None,
        tags: list[int] | None,
    ) -> None:
        if (left := due - time.monotonic_ns()) > 0:
            time.sleep(left / 1e9)
        else:
            self.late += 1
            self.late_ns -= left
        if stamped is not None and self.on_stamps is not None:
            self.on_stamps(*stamped)  # before the items: each is paired when it is got
        if tags is not None:
            self.deliver_tagged(items, tags)
            return
        for item in items:
            self.head_buf.put(item)  # tapped ``deliver``; waits while the buffer is full

    @staticmethod
    def _ray() -> Any:
        import ray

        return ray

    def __reduce__(self) -> tuple[Any, ...]:
        return (HostLink, (self.name, self.capacity, self.link, self.bus, self.ground_truth,
                           self.stamped))  # fmt: skip
