"""Which sub-queues of virtual queues a device reduces itself, as in Lancaster, Wingbermuehle,
Beard & Chamberlain, Crossing Boundaries in TimeTrial (2011).

In: the topology and the frame of each link channel's occupancy queries. Out: per device, the
``LocalQueue``s its agent reduces (with ``agents.device.LocalReduction``).
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscope.aggregate.specs import AggregationSpec
from streamscope.core.topology import Topology


@dataclass(frozen=True, slots=True)
class LocalQueue:
    """One sub-queue of a link channel that a device reduces itself.

    ``key`` = 2 * (the channel's index in the topology) + (0: tail side, 1: head side).
    """

    key: int
    channel: str
    side: str  # tail | head
    insert_probe: int  # ``tail`` or ``deliver``
    remove_probe: int  # ``send`` or ``head``
    state_probe: int  # the producer's state tracker (tail side), 0 when none
    raw: bool  # also ship the raw records (tracing across the link)
    frame_ns: int  # the frame of the channel's occupancy queries


@dataclass(frozen=True, slots=True)
class LocalState:
    """A stage whose states its host's agent reduces itself, per frame of ``frame_ns`` (its
    state queries' frame): the state records stay on the host."""

    probe: int
    stage: str
    frame_ns: int


def local_states(topology: Topology, frames: dict[str, int]) -> dict[str, tuple[LocalState, ...]]:
    """Per host resource, the stages in ``frames`` (stage -> frame ns) that run on it."""
    kind = {r.name: r.kind for r in topology.resources}
    where = {s.name: s.resource for s in topology.stages}
    out: dict[str, list[LocalState]] = {}
    for p in topology.probes:
        if p.kind == "state" and p.target in frames and kind.get(where.get(p.target, "")) == "host":
            out.setdefault(where[p.target], []).append(LocalState(p.id, p.target, frames[p.target]))
    return {k: tuple(v) for k, v in out.items()}


def subqueue_key(topology: Topology, channel: str, side: str) -> int:
    names = [c.name for c in topology.channels]
    return 2 * names.index(channel) + (0 if side == "tail" else 1)


def local_queues(
    topology: Topology, frames: dict[str, int], raw: frozenset[str] | None = frozenset()
) -> dict[str, tuple[LocalQueue, ...]]:
    """Per device or host resource, the sub-queues it reduces: those of the link channels in
    ``frames`` (channel -> frame ns of its occupancy queries) whose side runs on the device.
    ``raw``: channels whose records also cross the link raw (None: all of them)."""
    kind = {r.name: r.kind for r in topology.resources}
    where = {s.name: s.resource for s in topology.stages}
    probe = {(p.kind, p.target): p.id for p in topology.probes}
    out: dict[str, list[LocalQueue]] = {}
    for ch in topology.channels:
        if not ch.is_link or ch.name not in frames:
            continue
        for side, stage, ends in (
            ("tail", ch.src, ("tail", "send")),
            ("head", ch.dst, ("deliver", "head")),
        ):
            res = where[stage]
            ids = [probe.get((e, ch.name), 0) for e in ends]
            if kind.get(res) not in ("device", "host") or not all(ids):
                continue
            state = probe.get(("state", ch.src), 0) if side == "tail" else 0
            out.setdefault(res, []).append(
                LocalQueue(
                    subqueue_key(topology, ch.name, side),
                    ch.name,
                    side,
                    ids[0],
                    ids[1],
                    state,
                    raw is None or ch.name in raw,
                    frames[ch.name],
                )
            )
    return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class HostPair:
    """A (query, target) pair a cluster host's agent reduces to frames itself
    (``Plan.host_reduced``): the records of its taps stay on the host."""

    query_id: int
    metric: str
    target: str
    specs: tuple[AggregationSpec, ...]
    frame_ns: int
