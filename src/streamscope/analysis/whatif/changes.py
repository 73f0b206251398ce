"""Changes made to a model: replicas, speed, a channel's capacity, the CPUs (``apply_changes``)."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence
from dataclasses import replace

from streamscope.analysis.whatif.kinds import (
    Change,
    PipelineModel,
    WhatIfError,
)
from streamscope.model.network import (
    ChannelModel,
    Network,
    StageModel,
)


def apply_changes(model: PipelineModel, changes: Sequence[Change]) -> Network:
    """The model's network with ``changes`` made, in order."""
    net = model.network
    for ch in changes:
        net = _apply(net, ch, model.program)
    return net


def _apply(net: Network, ch: Change, program: bool = False) -> Network:
    if ch.attr == "cpus":
        return replace(net, cores=int(ch.value))
    if ch.attr == "capacity":
        found = [
            c for c in net.channels if c.name == ch.target or _spaced(c.name) == _spaced(ch.target)
        ]
        if not found:
            raise WhatIfError(
                f"change {ch.text!r}: no channel {ch.target!r}; channels: "
                + ", ".join(c.name for c in net.channels)
            )
        return replace(net, channels=tuple(
            replace(c, capacity=int(ch.value)) if c in found else c for c in net.channels
        ))  # fmt: skip
    members = [s.name for s in net.stages if fnmatch.fnmatchcase(s.name, ch.target)]
    if not members:
        raise WhatIfError(
            f"change {ch.text!r}: no stage matches {ch.target!r}; stages: "
            + ", ".join(s.name for s in net.stages)
        )
    if ch.attr == "speed":
        return replace(net, stages=tuple(
            replace(s, speed=s.speed * ch.value) if s.name in members else s for s in net.stages
        ))  # fmt: skip
    if program:  # more (or fewer) threads, processes or tasks taking from the same queues
        return replace(net, stages=tuple(
            replace(s, workers=int(ch.value)) if s.name in members else s for s in net.stages
        ))  # fmt: skip
    return _replicas(net, members, int(ch.value), ch)


def _spaced(name: str) -> str:
    return " -> ".join(p.strip() for p in name.split("->"))


def _replicas(net: Network, members: list[str], n: int, ch: Change) -> Network:
    """``members`` (parallel replicas, or one stage) made ``n``: the last ones dropped, or
    copies of the first added, each fed and feeding as it is; a copy of a stage alone on its
    process gets a process of its own (on threads, or sharing a process, it shares that)."""
    first = net.stage(members[0])
    ins = [c for c in net.channels if c.dst == first.name]
    outs = [c for c in net.channels if c.src == first.name]
    for m in members[1:]:
        if {c.src for c in net.channels if c.dst == m} != {c.src for c in ins} or {
            c.dst for c in net.channels if c.src == m
        } != {c.dst for c in outs}:
            raise WhatIfError(
                f"change {ch.text!r}: {', '.join(members)} are not parallel replicas (fed by and "
                "feeding the same stages)"
            )
    sharers = [s for s in net.stages if s.interpreter == first.interpreter]
    own = (
        first.interpreter != "main"
        and all(s.name in members for s in sharers)
        and len({net.stage(m).interpreter for m in members}) == len(members)
    )
    keep = set(members[:n])
    stages = [s for s in net.stages if s.name not in members or s.name in keep]
    channels = [c for c in net.channels if (c.src not in members or c.src in keep)
                and (c.dst not in members or c.dst in keep)]  # fmt: skip
    names = {s.name for s in net.stages}
    group = set(keep)
    num = re.fullmatch(r"(.*\D)(\d+)", first.name)
    k = 0
    for i in range(len(members), n):
        while True:
            name = (f"{num.group(1)}{int(num.group(2)) + i + k}" if num
                    else f"{first.name}+{i + k}")  # fmt: skip
            if name not in names:
                break
            k += 1
        names.add(name)
        interp = f"{first.interpreter}+{name}" if own else first.interpreter
        stages.insert(_after(stages, group), replace(first, name=name, interpreter=interp))
        group.add(name)
        channels.extend(replace(c, name=f"{c.src} -> {name}", dst=name) for c in ins)
        channels.extend(replace(c, name=f"{name} -> {c.dst}", src=name) for c in outs)
    switch = dict(net.switch_ns)
    for s in stages:
        if s.interpreter not in switch and first.interpreter in switch:
            switch[s.interpreter] = switch[first.interpreter]
    return replace(net, stages=tuple(stages), channels=tuple(_ordered(channels, stages)),
                   switch_ns=switch)  # fmt: skip


def _after(stages: list[StageModel], names: set[str]) -> int:
    """Where a new replica goes: after the group's last stage."""
    return 1 + max((i for i, s in enumerate(stages) if s.name in names), default=len(stages) - 1)


def _ordered(channels: list[ChannelModel], stages: list[StageModel]) -> list[ChannelModel]:
    """Channels in the order their producers deal to them and their consumers take from them:
    by producer, then consumer, in stage order (a replica's channels where its place is)."""
    place = {s.name: i for i, s in enumerate(stages)}
    return sorted(channels, key=lambda c: (place[c.src], place[c.dst]))
