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
import itertools
import os
import time
from multiprocessing.context import BaseContext
from pathlib import Path
from typing import Any

import numpy as np

from streamscope.pipeline.channel import EOS, Aborted, ThreadChannel
from streamscope.pipeline.resources import LinkSpec
from streamscope.pipeline.shm import ProcessChannel
from streamscope.probes.taps import StateTracker

#: Batches in flight on the bus at once (between the mover and the receiver).
IN_FLIGHT = 2
_HEADROOM = 256  # bytes per batch beyond its items' own slots (pickled list overhead)


def _true_ns() -> int:
    """The emulation's physical time (never a device clock): for the bus's own timing and for
    ground truth, which the monitor never reads."""
    return time.monotonic_ns()


class _TruthBuffer(ThreadChannel):
    """A buffer that also keeps the true time of each insertion (``at="put"``) or removal."""

    def __init__(self, maxsize: int, *, name: str, at: str) -> None:
        super().__init__(maxsize, name=name)
        self.at = at
        self.truth: list[int] | None = None
        self.last_put = time.monotonic()  # the mover's inactivity timeout runs from here

    def _put(self, item: Any) -> None:
        super()._put(item)
        self.last_put = time.monotonic()
        if self.truth is not None and self.at == "put" and item is not EOS:
            self.truth.append(_true_ns())

    def _get(self) -> Any:
        item = super()._get()
        if self.truth is not None and self.at == "get" and item is not EOS:
            self.truth.append(_true_ns())
        return item


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
        self.tail_buf = _TruthBuffer(capacity, name=f"{name} [tail buffer]", at="put")
        #: The consumer's side: tapped ``deliver`` (off the bus) and ``head`` (removals).
        self.head_buf = _TruthBuffer(capacity, name=f"{name} [head buffer]", at="get")
        if ground_truth:
            self.tail_buf.truth = []
            self.head_buf.truth = []
        self.bus = ProcessChannel(
            f"{name} [bus]", IN_FLIGHT, ctx, link.bulk_size * (slot_bytes + 16) + _HEADROOM
        )
        self.transfers = 0

    # -- the stages' view: a channel like any other ---------------------------------------------

    def put_tracked(self, item: Any, tracker: StateTracker | None) -> None:
        self.tail_buf.put_tracked(item, tracker)

    def get_tracked(self, tracker: StateTracker | None) -> Any:
        return self.head_buf.get_tracked(tracker)

    def abort(self) -> None:
        self.tail_buf.abort()
        self.head_buf.abort()

    # -- the bus -----------------------------------------------------------------------------------

    def _wait_batch(self) -> int:
        """Wait until a transfer may start; the number of slots to take (items, and the end
        marker when it is among them)."""
        q, b = self.tail_buf, self.link.bulk_size
        timeout_s = self.link.timeout_ns / 1e9
        with q.not_empty:
            while True:
                if q.aborted:
                    raise Aborted(self.name)
                n = q._qsize()
                head = itertools.islice(q.queue, 0, min(n, b))
                # By identity: items may be arrays, whose == is elementwise.
                at = next((i for i, x in enumerate(head) if x is EOS), -1)
                if at >= 0:
                    return at + 1
                if n >= b:
                    return b
                idle = time.monotonic() - q.last_put
                if n and idle >= timeout_s:
                    return n  # no new item for the timeout: flush what waits
                left = timeout_s - idle if n else None
                q.not_empty.wait(None if left is None or left == float("inf") else left)

    def mover(self) -> None:
        """The producer's side of the bus: until the end marker has crossed."""
        transfer_s = self.link.transfer_ns / 1e9
        while True:
            m = self._wait_batch()
            batch = [self.tail_buf.get_nowait() for _ in range(m)]  # tapped ``send``
            ended = batch[-1] is EOS
            items = batch[:-1] if ended else batch
            if items:
                end = time.monotonic() + transfer_s
                while (left := end - time.monotonic()) > 0:  # the bus is busy
                    time.sleep(left)
                self.bus.put_tracked((_true_ns() + int(self.link.latency_ns), items), None)
                self.transfers += 1
            if ended:
                self.bus.put_tracked(EOS, None)
                return

    def receiver(self) -> None:
        """The consumer's side of the bus: until the end marker has arrived."""
        while True:
            got, msg = self.bus.get_within(0.1)
            if not got:
                if self.head_buf.aborted:
                    raise Aborted(self.name)
                continue
            if msg is EOS:
                self.head_buf.put(EOS)
                return
            due, items = msg
            while (left := due - _true_ns()) > 0:  # still in flight
                time.sleep(left / 1e9)
            for item in items:
                self.head_buf.put(item)  # tapped ``deliver``; waits while the buffer is full
                if self.head_buf.aborted:
                    raise Aborted(self.name)

    # -- ground truth --------------------------------------------------------------------------------

    def save_truth(self, directory: str, index: int, side: str) -> None:
        """Write this process's side of the ground truth: ``<index>-in.npy`` (true insertion
        times, producer side) or ``<index>-out.npy`` (true removal times, consumer side)."""
        buf = self.tail_buf if side == "in" else self.head_buf
        if buf.truth is None:
            return
        path = Path(directory) / f"{index}-{side}.npy"
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.save(f, np.asarray(buf.truth, dtype=np.int64))
        os.replace(tmp, path)
