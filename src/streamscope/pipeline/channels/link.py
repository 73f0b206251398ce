"""A channel across a device boundary: a tail buffer, a bulk-transfer bus, a head buffer.

In: items put by the producer stage (in its own process). Out: the same items, in order, got by
the consumer stage (in its process), after they waited in the tail buffer for a transfer, crossed
the bus in a batch of up to ``bulk_size`` and waited in the head buffer. Only the two buffers are
tapped (``tail``/``send`` at the producer's side, ``deliver``/``head`` at the consumer's), each
in its own process's clock; what is on the bus is opaque, as on a real DMA link.

The mover (a thread in the producer's process) starts a transfer once ``bulk_size`` items wait,
or when none has arrived for the timeout, or at the end of stream; it takes them out of the tail
buffer, holds the bus for the transfer time, and hands the batch to a shared-memory slot with the
time it may be delivered (``latency`` later). The receiver (a thread in the consumer's process)
waits until then and puts the items into the head buffer, waiting while that is full.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np

from streamscope.core import native
from streamscope.core.stream import EOS, Aborted
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.channels.shm import ProcessChannel
from streamscope.pipeline.describe.resources import LinkSpec
from streamscope.pipeline.describe.specs import ChannelSpec

#: Batches in flight on the bus at once (between the mover and the receiver).
IN_FLIGHT = 2
_HEADROOM = 256  # bytes per batch beyond its items' own slots (pickled list overhead)


def _true_ns() -> int:
    """The emulation's physical time (never a device clock): for the bus's own timing and for
    ground truth, which the monitor never reads."""
    return time.monotonic_ns()


class LinkChannel:
    """Create before forking; the producer's process runs ``mover()``, the consumer's
    ``receiver()``, each in a thread of its own (see ``scope.start_links``)."""

    def __init__(
        self,
        name: str,
        capacity: int,
        ctx: BaseContext,
        link: LinkSpec,
        slot_bytes: int,
        *,
        ground_truth: bool = False,
    ) -> None:
        self.name = name
        self.capacity = capacity
        # A transfer cannot wait for more items than the sending buffer holds: a full buffer
        # starts one (else a buffer smaller than a transfer would never send).
        self.link = dataclasses.replace(link, bulk_size=min(link.bulk_size, capacity))
        #: The producer's side: tapped ``tail`` (insertions) and ``send`` (taken for the bus).
        self.tail_buf = ThreadChannel(capacity, name=f"{name} [tail buffer]")
        self.tail_buf.watch_idle()  # the inactivity timeout runs from the last insertion
        #: The consumer's side: tapped ``deliver`` (off the bus) and ``head`` (removals).
        self.head_buf = ThreadChannel(capacity, name=f"{name} [head buffer]")
        self.ground_truth = ground_truth
        if ground_truth:
            # Validation only: the true time of each insertion and each removal.
            self.tail_buf.keep_truth("put")
            self.head_buf.keep_truth("get")
        self.bus = ProcessChannel(
            f"{name} [bus]", IN_FLIGHT, ctx, link.bulk_size * (slot_bytes + 16) + _HEADROOM
        )
        self.transfers = 0
        #: Items carry path tags over the bus (``latency(SRC ~> DST)`` through this link): the
        #: producer's side takes them with the items, the consumer's hands each one on.
        self.tagged = False

    # -- the stages' view: a channel like any other ---------------------------------------------

    def put(self, item: Any) -> None:
        self.tail_buf.put(item)

    def get(self) -> Any:
        return self.head_buf.get()

    def abort(self) -> None:
        self.tail_buf.abort()
        self.head_buf.abort()

    @property
    def items_in(self) -> int:
        """Items the producer put (into the tail buffer)."""
        return self.tail_buf.items_in

    @property
    def items_out(self) -> int:
        """Items the consumer got (from the head buffer)."""
        return self.head_buf.items_out

    # -- the bus -----------------------------------------------------------------------------------

    def next_batch(self) -> tuple[list[Any], bool]:
        """The next transfer's items out of the tail buffer (tapped ``send``), once there are
        ``bulk_size`` of them, none came for the timeout, or the stream ended; and whether it
        ended."""
        items, _, ended = self._next(False)
        return items, ended

    def _next(self, tagged: bool) -> tuple[list[Any], list[int] | None, bool]:
        """``next_batch``, and the items' path tags where they carry them."""
        m = self.tail_buf.wait_batch(self.link.bulk_size, self.link.timeout_ns / 1e9)
        tags: list[int] | None = None
        if tagged:
            batch, tags = self.tail_buf.take_tagged(m)
        else:
            batch = self.tail_buf.take(m)
        ended = batch[-1] is EOS
        if ended:
            batch = batch[:-1]
            tags = tags[:-1] if tags is not None else None
        return batch, tags, ended

    def mover(self) -> None:
        """The producer's side of the bus: until the end marker has crossed."""
        transfer_s = self.link.transfer_ns / 1e9
        while True:
            items, tags, ended = self._next(self.tagged)
            if items:
                end = time.monotonic() + transfer_s
                while (left := end - time.monotonic()) > 0:  # the bus is busy
                    time.sleep(left)
                due = _true_ns() + int(self.link.latency_ns)
                self.bus.put((due, items) if tags is None or not any(tags) else (due, items, tags))
                self.transfers += 1
            if ended:
                self.bus.put(EOS)
                return

    def arrivals(self) -> Iterator[Any]:
        """Each message off the bus, until the end marker (which goes into the head buffer);
        Aborted once the run stops."""
        while True:
            got, msg = self.bus.get_within(0.1)
            if not got:
                if self.head_buf.aborted:
                    raise Aborted(self.name)
                continue
            if msg is EOS:
                self.head_buf.put(EOS)
                return
            yield msg

    def deliver_tagged(self, items: list[Any], tags: list[int]) -> None:
        """Items into the head buffer, each with its path tag (handed on as a stage hands on
        what it took)."""
        tag = native.set_current_tag
        for item, t in zip(items, tags, strict=True):
            tag(t)
            self.head_buf.put(item)
        tag(0)

    def receiver(self) -> None:
        """The consumer's side of the bus: until the end marker has arrived."""
        for due, items, *tagged in self.arrivals():
            while (left := due - _true_ns()) > 0:  # still in flight
                time.sleep(left / 1e9)
            if tagged:
                self.deliver_tagged(items, tagged[0])
                continue
            for item in items:
                self.head_buf.put(item)  # tapped ``deliver``; waits while the buffer is full

    # -- ground truth --------------------------------------------------------------------------------

    def save_truth(self, directory: str, index: int, side: str) -> None:
        """Write this process's side of the ground truth: ``<index>-in.npy`` (true insertion
        times, producer side) or ``<index>-out.npy`` (true removal times, consumer side)."""
        if not self.ground_truth:
            return
        buf = self.tail_buf if side == "in" else self.head_buf
        path = Path(directory) / f"{index}-{side}.npy"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.frombuffer(buf.truth(), dtype=np.int64))
        os.replace(tmp, path)


def save_links_truth(
    specs: Iterable[ChannelSpec],
    channels: Mapping[str, object],
    stages: Collection[str],
    directory: str,
) -> None:
    """This process's side of the ground truth of every link channel that its ``stages`` put
    into (``in``) or get from (``out``), numbered by the channel's place in ``specs``."""
    for index, spec in enumerate(specs):
        ch = channels.get(spec.name)  # a host's worker holds only the channels it touches
        if isinstance(ch, LinkChannel):
            if spec.src in stages:
                ch.save_truth(directory, index, "in")
            if spec.dst in stages:
                ch.save_truth(directory, index, "out")


def link_counts(
    specs: Iterable[ChannelSpec], channels: Mapping[str, object], stages: Collection[str]
) -> dict[str, dict[str, int]]:
    """This process's side of each network link its ``stages`` send on or receive from: the
    batches it sent (sender), those that arrived late and by how much in all (receiver), for
    a NOTE."""
    out: dict[str, dict[str, int]] = {}
    for spec in specs:
        ch = channels.get(spec.name)
        late = getattr(ch, "late", None)
        if not isinstance(ch, LinkChannel) or late is None:
            continue
        sent = ch.transfers if spec.src in stages else 0
        here = spec.dst in stages
        if spec.src in stages or here:
            out[spec.name] = {"transfers": sent, "late": late if here else 0,
                              "late_ns": getattr(ch, "late_ns", 0) if here else 0}  # fmt: skip
    return out
