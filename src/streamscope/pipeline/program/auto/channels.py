"""The channels a program's queues become, named from the stages found at their ends.

In: the stages seen putting into and getting from a queue. Out: the channel ``src -> dst``,
declared to the session once both are known, with the rings of the ends a query watches.
"""

from __future__ import annotations

import time
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any

from streamscope.core import forksafe
from streamscope.core.records import Kind
from streamscope.core.rings import close_ring, declare, next_probe_ids
from streamscope.core.topology import ChannelEnd, ChannelInfo, ProbeInfo, Topology
from streamscope.pipeline.program.auto import costs
from streamscope.pipeline.program.auto.claims import claim_channel, forget_claims, new_queue_id
from streamscope.pipeline.program.registry import REGISTRY, taps_for
from streamscope.probes.taps import COST_CALL, RingTap, host_clock

#: Insertions made before a channel is named whose times are kept (the latest ones: the
#: items still in the queue when it is named, in a queue of at most this many).
EARLY = 1 << 14

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


def declare_end(channel: str, stage: str, side: str) -> None:
    """Declare ``stage`` one more producer (``side`` ``tail``) or consumer (``head``) of the
    named ``channel``: a queue that several stages put into or take from."""
    assert REGISTRY.directory is not None
    REGISTRY.add_stage(stage)
    declare(REGISTRY.directory, Topology("", ends=(ChannelEnd(channel, stage, side),)))


def end_tap(probe: int, end: str) -> RingTap | None:
    """This process's tap of a channel's ``end`` (None: unwatched, or no session)."""
    rec = REGISTRY.recorder()
    if rec is None or not probe:
        return None
    return rec.tap(probe, Kind.PUT if end == "tail" else Kind.GET, cost=COST_CALL)


def end_ring(probe: int, end: str) -> Any:
    """This process's ring for a channel's ``end`` (None: unwatched, or no session)."""
    tap = end_tap(probe, end)
    return tap.ring if tap is not None else None


@dataclass(slots=True)
class _Free:
    """A dropped queue's channel, kept for the next queue of this process with the same ends:
    its name, its taps, the items it carried, and since when it is free (monotonic s)."""

    name: str
    taps: list[RingTap]
    seq: int
    since: float


#: The shape a dropped queue's channel can be taken up by: (src, dst, capacity, transport).
_Shape = tuple[str, str, int, str]

#: Queues of this process dropped and not looked at yet, and the channels they left free by
#: shape (process-wide: the garbage collector drops a queue whenever it lets it go, maybe
#: inside a lock of streamscope's, so what it leaves is only handled at the next declaration).
_dropped: deque[tuple[_Shape, _Free]] = deque()
_free: dict[_Shape, list[_Free]] = {}
#: A free channel no queue took up for this long is retired (its rings closed), s.
FREE_FOR_S = 0.2
#: Guards ``_free`` (process-wide): queues of several threads are named at once, each under its own lock
#: (``__del__`` only appends to ``_dropped``, which needs none). Free again in a forked child.
_free_lock = forksafe.lock()


def _take_dropped(now: float) -> None:
    """The dropped queues' channels made free; those free for ``FREE_FOR_S`` retired."""
    while _dropped:
        shape, free = _dropped.popleft()
        _free.setdefault(shape, []).append(free)
    for shape in [k for k, fs in _free.items() if fs[0].since + FREE_FOR_S <= now]:
        left = []
        for f in _free[shape]:
            if f.since + FREE_FOR_S <= now:
                retire_taps(f.taps)
            else:
                left.append(f)
        if left:
            _free[shape] = left
        else:
            del _free[shape]


def _take_free(shape: _Shape) -> _Free | None:
    """The lowest-numbered channel of ``shape`` a dropped queue left free, if any."""
    frees = _free.get(shape)
    if not frees:
        return None
    best = min(frees, key=lambda f: (len(f.name), f.name))
    frees.remove(best)
    if not frees:
        del _free[shape]  # a shape with none free has no entry (``_take_dropped``)
    return best


def retire_taps(taps: list[RingTap]) -> None:
    """A queue was dropped: its taps in this process record nothing more, their rings are
    closed and removed once the monitor has drained them (it never raises)."""
    rec = REGISTRY.recorder()
    for tap in taps:
        try:
            if rec is not None:
                rec.retire(tap)
            elif tap.published:
                close_ring(tap.mem)
        except Exception:  # noqa: S110 - the queue is gone either way
            pass


def forget_channels() -> None:
    """The session ended: the channels made meanwhile stop recording, and names are claimed
    anew."""
    for ch in list(_channels):
        ch.detach()
    with _free_lock:
        _dropped.clear()
        _free.clear()
    forget_claims()


class ProgramChannel:
    """One thread queue's names, counts and rings (used under the queue's own lock)."""

    __slots__ = (
        "__weakref__", "capacity", "dst", "dsts", "early", "early_out", "got_by", "head", "id", "n_in",
        "n_out", "name", "put_by", "src", "srcs", "tail", "taps", "transport",
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
        #: Ticks of the latest insertions made before the channel was named (its consumer not
        #: known yet): recorded when it is, so that what waited in the queue meanwhile counts.
        self.early: deque[int] | None = None
        #: ... and of the latest removals (a pool's worker takes its first task before it
        #: knows the function it applies, the stage at the queue's head).
        self.early_out: deque[int] | None = None
        self.taps: list[RingTap] = []
        #: Every stage seen putting into the queue and taking from it, in the order seen.
        self.srcs: list[str] = []
        self.dsts: list[str] = []
        #: The tracker of the last worker seen at each end: a put or get by another looks
        #: whether its stage is new there (``seen``).
        self.put_by: Any = None
        self.got_by: Any = None

    def inserted(self) -> None:
        """An item went in (under the queue's lock): counted, and recorded where the tail is
        watched (its time kept meanwhile, before the channel is named)."""
        self.n_in += 1
        if self.tail is not None:
            self.tail.record(self.n_in)
        elif self.name is None:
            self.put_early()

    def removed(self) -> None:
        """An item came out (under the queue's lock): counted, and recorded where the head is
        watched."""
        self.n_out += 1
        if self.head is not None:
            self.head.record(self.n_out)
        elif self.name is None and REGISTRY.active():
            if self.early_out is None:
                self.early_out = deque(maxlen=EARLY)
            self.early_out.append(host_clock().now())

    def put_early(self) -> None:
        """An insertion before the channel is named (``n_in`` counted already)."""
        if REGISTRY.active():
            if self.early is None:
                self.early = deque(maxlen=EARLY)
            self.early.append(host_clock().now())

    def saw(self, end: str, who: str | None) -> None:
        """The stage ``who`` puts (``tail``) or gets (``head``): name the channel once stages
        at both ends are known (and not only one stage at both: a queue a stage keeps for
        itself is no channel between stages), while a session is active; a stage new at an
        end of a named channel is declared one of its producers or consumers."""
        if who is None:
            return
        seen = self.srcs if end == "tail" else self.dsts
        if who in seen:
            return
        seen.append(who)
        if self.name is not None:
            if REGISTRY.active():
                with costs.spent():
                    declare_end(self.name, who, end)
            return
        if not (self.srcs and self.dsts) or len({*self.srcs, *self.dsts}) == 1:
            return
        if not REGISTRY.active():
            return
        with costs.spent(queues=1):
            self.src = self.srcs[0]
            self.dst = next((d for d in self.dsts if d != self.src), self.dsts[0])
            self._name()
            for stage in self.srcs[1:]:
                declare_end(self.name or "", stage, "tail")
            for stage in self.dsts:
                if stage != self.dst:
                    declare_end(self.name or "", stage, "head")

    def seen(self, end: str, tracker: Any, who: str | None) -> None:
        """A worker (its ``tracker``) other than the last seen at ``end`` puts or gets, for the
        stage ``who`` (a thread queue asks only then: the same worker again is the same stage,
        whether the channel is named yet or not)."""
        if end == "tail":
            self.put_by = tracker
        else:
            self.got_by = tracker
        self.saw(end, who)

    def _name(self) -> None:
        """The channel named and its taps made, once its two ends are known."""
        assert self.src is not None
        assert self.dst is not None
        shape = (self.src, self.dst, self.capacity, self.transport)
        with _free_lock:
            _take_dropped(time.monotonic())
            free = _take_free(shape)
        if free is not None:
            # A dropped queue's channel taken up: same name and probes, numbered on from
            # the items it carried (a program making a queue per request has as many
            # channels as queues at once, and costs the monitor nothing per queue).
            self.name, self.taps = free.name, free.taps
            self.n_in += free.seq
            self.n_out += free.seq
            self.tail = self._ring(Kind.PUT)
            self.head = self._ring(Kind.GET)
        else:
            self.name, tail, head = declare_channel(
                self.id, self.src, self.dst, self.capacity, self.transport
            )
            taps = [end_tap(tail, "tail"), end_tap(head, "head")]
            self.tail, self.head = (t.ring if t is not None else None for t in taps)
            self.taps = [t for t in taps if t is not None]
        for ring, early, count in ((self.tail, self.early, self.n_in),
                                   (self.head, self.early_out, self.n_out)):  # fmt: skip
            if early and ring is not None:
                first = count - len(early) + 1
                for i, ticks in enumerate(early):
                    ring.record_at(ticks, first + i)
        self.early = self.early_out = None
        _channels.add(self)

    def _ring(self, kind: int) -> Any:
        return next((t.ring for t in self.taps if t.kind == kind), None)

    def detach(self) -> None:
        self.tail = self.head = None
        self.taps = []
        self.name = None
        self.srcs, self.dsts = [], []
        self.put_by = self.got_by = None

    def __del__(self) -> None:
        # The queue was dropped: its channel is free for the next one with the same ends.
        if self.name is not None and self.src is not None and self.dst is not None:
            shape = (self.src, self.dst, self.capacity, self.transport)
            free = _Free(self.name, self.taps, max(self.n_in, self.n_out), time.monotonic())
            _dropped.append((shape, free))


__all__ = [
    "ProgramChannel", "declare_channel", "declare_end", "end_ring", "end_tap", "forget_channels", "retire_taps",
]  # fmt: skip
