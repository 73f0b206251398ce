"""Stages and channels a program made many of, drawn as one: past ``FAMILY_AT`` stages, a family
of them (``produce``, ``produce #2``, ...) is one box; past ``FAMILY_AT`` channels, those of one
family between the same two boxes are one edge; each says how many it stands for.

In: a ``Topology``, each stage's breakdown and each channel's summary by name, the bottleneck's
stages. Out: a ``Folded``: the topology to draw, the figures of what it draws (a family's each on
average, its max the largest), how many each box and edge stands for, the bottleneck's boxes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

from streamscope.analysis import ChannelSummary, StageBreakdown
from streamscope.core.topology import (
    FAMILY_AT,
    ChannelEnd,
    ChannelInfo,
    StageInfo,
    Topology,
    family,
)
from streamscope.report.families import families, weighted_mean
from streamscope.report.graph.channel import ChannelLike
from streamscope.report.graph.stage import StageLike


@dataclass(frozen=True, slots=True)
class Folded:
    """What the graph draws: the topology (a family one stage or channel), the figures by name,
    how many stages or channels each family stands for (absent: one), the bottleneck's boxes."""

    topology: Topology
    stages: Mapping[str, StageLike]
    channels: Mapping[str, ChannelLike]
    stage_members: Mapping[str, int]
    channel_members: Mapping[str, int]
    bottleneck: frozenset[str]


def _mean(vals: Sequence[tuple[float | None, float]]) -> float | None:
    """The mean of the known values, weighted (a plain mean where no weight says)."""
    return weighted_mean([(v, w) for v, w in vals if v is not None])


def stage_family(
    name: str, members: Sequence[StageLike], infos: Sequence[StageInfo]
) -> StageBreakdown:
    """The family ``name`` of stages ``members`` (their topology entries ``infos``), as one
    stage's breakdown: its time in each state the average of its members' (weighted by the
    time each observed, where each says)."""
    weight = [float(getattr(m, "observed_ns", 0) or 0) for m in members]
    resources = list(dict.fromkeys(i.resource for i in infos))
    resource = resources[0] if len(resources) == 1 else f"{len(resources)} resources"

    def avg(state: str) -> float | None:
        return _mean([(getattr(m, state), w) for m, w in zip(members, weight, strict=True)])

    role = infos[0].role if infos else "stage"
    return StageBreakdown(name, resource, role, avg("idle"), avg("busy"), avg("blocked_in"),
                       avg("blocked_out"))  # fmt: skip


def channel_family(
    name: str, src: str, dst: str, members: Sequence[ChannelInfo], summaries: Sequence[ChannelLike]
) -> ChannelSummary:
    """The family ``name`` of channels ``members`` from box ``src`` to box ``dst`` (their
    summaries, where measured), as one channel's summary: each on average (its occupancy, the
    time it was full or empty, its throughput), its max and capacity the largest, its verdict
    ``rejected`` if any member's was."""

    def each(field: str) -> float | None:
        return _mean([(getattr(s, field), 1.0) for s in summaries])

    verdicts = {s.verdict for s in summaries if s.verdict}
    verdict = "rejected" if "rejected" in verdicts else next(iter(sorted(verdicts)), None)
    tops = [s.max_occupancy for s in summaries if s.max_occupancy is not None]
    return ChannelSummary(
        name, src, dst, max(c.capacity for c in members), members[0].transport,
        each("mean_occupancy"), max(tops) if tops else None, each("full_fraction"),
        each("empty_fraction"), each("throughput_per_s"),
        any(c.is_link for c in members) or any(s.virtual for s in summaries), verdict,
    )  # fmt: skip


def fold(
    topology: Topology,
    stages: Mapping[str, StageLike],
    channels: Mapping[str, ChannelLike],
    bottleneck: Collection[str] = (),
) -> Folded:
    """The graph of ``topology`` with its families drawn as one (itself at or under
    ``FAMILY_AT`` stages and channels)."""
    names = [s.name for s in topology.stages]
    names = list(dict.fromkeys([*names, *(n for c in topology.channels for n in (c.src, c.dst))]))
    if len(names) <= FAMILY_AT and len(topology.channels) <= FAMILY_AT:
        return Folded(topology, stages, channels, {}, {}, frozenset(bottleneck))
    fams = families(names)
    box = {m: fam for fam, ms in fams.items() for m in ms}
    info = {s.name: s for s in topology.stages}
    new_stages: list[StageInfo] = []
    new_sb: dict[str, StageLike] = {}
    stage_members: dict[str, int] = {}
    for fam, ms in fams.items():
        known = [info[m] for m in ms if m in info]
        if len(ms) == 1:
            new_stages += known
            if ms[0] in stages:
                new_sb[fam] = stages[ms[0]]
            continue
        stage_members[fam] = len(ms)
        if known:  # (a family of channels' ends that are no stages is placed as they are)
            new_stages.append(replace(known[0], name=fam))
        measured = [stages[m] for m in ms if m in stages]
        if measured:
            new_sb[fam] = stage_family(fam, measured, known)
    new_channels, new_cs, channel_members = _channels(topology.channels, channels, box)
    drawn = {c.name: c for c in new_channels}
    ends = {  # a shared queue's other producers and consumers, as the boxes they are in
        ChannelEnd(e.channel, box.get(e.stage, e.stage), e.side): None
        for e in topology.ends
        if e.channel in drawn
        and box.get(e.stage, e.stage)
        != (drawn[e.channel].src if e.side == "tail" else drawn[e.channel].dst)
    }
    folded = replace(
        topology, stages=tuple(new_stages), channels=tuple(new_channels), ends=tuple(ends)
    )
    neck = frozenset(box.get(s, s) for s in bottleneck)
    return Folded(folded, new_sb, new_cs, stage_members, channel_members, neck)


def _channels(
    infos: Sequence[ChannelInfo], channels: Mapping[str, ChannelLike], box: Mapping[str, str]
) -> tuple[list[ChannelInfo], dict[str, ChannelLike], dict[str, int]]:
    """The channels between the boxes drawn: past ``FAMILY_AT``, one per family of them between
    the same two boxes, named after the family (where another family of that name joins other
    boxes: after its first member)."""
    groups: dict[tuple[str, str, str], list[ChannelInfo]] = {}
    many = len(infos) > FAMILY_AT
    for c in infos:
        src, dst = box.get(c.src, c.src), box.get(c.dst, c.dst)
        groups.setdefault((family(c.name) if many else c.name, src, dst), []).append(c)
    taken = {ms[0].name for ms in groups.values() if len(ms) == 1}
    out: list[ChannelInfo] = []
    figures: dict[str, ChannelLike] = {}
    members: dict[str, int] = {}
    for (fam, src, dst), ms in groups.items():
        if len(ms) == 1:
            out.append(replace(ms[0], src=src, dst=dst))
            if ms[0].name in channels:
                figures[ms[0].name] = channels[ms[0].name]
            continue
        name = next(n for n in (fam, ms[0].name, f"{fam} ({src} to {dst})") if n not in taken)
        taken.add(name)
        members[name] = len(ms)
        out.append(replace(ms[0], name=name, src=src, dst=dst))
        summaries = [channels[c.name] for c in ms if c.name in channels]
        if summaries:
            figures[name] = channel_family(name, src, dst, ms, summaries)
    return out, figures, members
