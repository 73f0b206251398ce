"""The channels a program's queues become, named from the stages found at their ends.

In: the stages seen putting into and getting from a queue. Out: the channel ``src -> dst``,
declared to the session once both are known, with the rings of the ends a query watches.
"""

from __future__ import annotations

import weakref
from typing import Any

from streamscope.core.records import Kind
from streamscope.core.rings import declare, next_probe_ids
from streamscope.core.topology import ChannelInfo, ProbeInfo, Topology
from streamscope.pipeline.auto.naming import claim_channel, forget_claims, new_queue_id
from streamscope.pipeline.registry import REGISTRY, taps_for
from streamscope.probes.taps import COST_CALL

#: Channels of this process, so that ending the session stops their recording.
_channels: weakref.WeakSet[ProgramChannel] = weakref.WeakSet()


def declare_channel(
    queue: str, src: str, dst: str, capacity: int, transport: str
) -> tuple[str, int, int]:
    """Declare the channel the queue ``queue`` (its id in the session) is, found in this
    process: (its name, tail probe, head probe; 0 where no query watches that end). Two queues
    with the same ends are two channels (``src -> dst``, ``src -> dst #2``), whichever
    processes declare them."""
    assert REGISTRY.directory is not None
    name = claim_channel(queue, src, dst)
    info = ChannelInfo(name, src, dst, capacity, transport)
    kinds = [k for k in ("tail", "head") if k in taps_for(REGISTRY.watches, channel=info)]
    ids = {"tail": 0, "head": 0}
    probes: tuple[ProbeInfo, ...] = ()
    if kinds:
        first = next_probe_ids(REGISTRY.directory, len(kinds))
        probes = tuple(ProbeInfo(first + i, k, name) for i, k in enumerate(kinds))
        ids.update({p.kind: p.id for p in probes})
    REGISTRY.add_stage(src)
    REGISTRY.add_stage(dst)
    declare(REGISTRY.directory, Topology("", channels=(info,), probes=probes))
    return name, ids["tail"], ids["head"]


def end_ring(probe: int, end: str) -> Any:
    """This process's ring for a channel's ``end`` (None: unwatched, or no session)."""
    rec = REGISTRY.recorder()
    if rec is None or not probe:
        return None
    return rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET, cost=COST_CALL).ring


def forget_channels() -> None:
    """The session ended: the channels made meanwhile stop recording, and names are claimed
    anew."""
    for ch in list(_channels):
        ch.detach()
    forget_claims()


class ProgramChannel:
    """One thread queue's names, counts and rings (used under the queue's own lock)."""

    __slots__ = (
        "__weakref__", "capacity", "dst", "head", "id", "n_in", "n_out", "name", "src", "tail",
        "transport",
    )  # fmt: skip

    def __init__(self, capacity: int, transport: str = "thread") -> None:
        self.id = new_queue_id()
        self.capacity = capacity
        self.transport = transport
        self.src: str | None = None
        self.dst: str | None = None
        self.name: str | None = None
        self.n_in = self.n_out = 0
        self.tail: Any = None
        self.head: Any = None

    def saw(self, end: str, who: str | None) -> None:
        """The stage ``who`` put (``tail``) or gets (``head``): name the channel once both
        ends are known, while a session is active."""
        if who is None:
            return
        if end == "tail" and self.src is None:
            self.src = who
        elif end == "head" and self.dst is None:
            self.dst = who
        if self.name is None and self.src and self.dst and REGISTRY.active():
            self.name, tail, head = declare_channel(
                self.id, self.src, self.dst, self.capacity, self.transport
            )
            self.tail, self.head = end_ring(tail, "tail"), end_ring(head, "head")
            _channels.add(self)

    def detach(self) -> None:
        self.tail = self.head = None


__all__ = ["ProgramChannel", "declare_channel", "end_ring", "forget_channels"]
