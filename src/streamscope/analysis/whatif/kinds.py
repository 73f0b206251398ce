"""What if's vocabulary: the changes it takes, the model of a run, one model's figures, the
self-check's verdict and a prediction; its tolerances; the units (a stage, or its replicas).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamscope.analysis.groups import StageGroup, stage_groups
from streamscope.analysis.jsonable import plain
from streamscope.core.errors import StreamscopeError
from streamscope.core.topology import ChannelInfo, StageInfo, Topology
from streamscope.model.network import (
    Network,
)

#: Relative throughput error within which the unchanged model reproduces its run.
THROUGHPUT_TOLERANCE = 0.10
#: Absolute error in a stage's busy share (of its working time) the self-check allows.
STATE_TOLERANCE = 0.15
#: A channel's mean occupancy may be off by this share of its capacity (at least 1 item).
OCCUPANCY_TOLERANCE = 0.15
#: Replications of each model (the interval comes from their spread).
REPLICATIONS = 8
#: The shares of CPU time holding the interpreter lock tried for each interpreter (the first,
#: all of it, unless a smaller share reproduces the run's states better by ``LOCK_MARGIN``).
LOCK_SHARES = (1.0, 0.5, 0.25, 0.1, 0.0)
LOCK_MARGIN = 0.03
#: Attributes a change may set, and what they mean.
ATTRIBUTES = {
    "replicas": "stages (a pattern: walk*) run by this many parallel replicas",
    "speed": "the stage's own code this many times as fast (2x, 0.5x)",
    "capacity": "the channel (SRC -> DST) holds this many items",
    "cpus": "the machine has this many CPUs (cpus=4, no target)",
}


class WhatIfError(StreamscopeError):
    """A change that cannot be made, or a run the model cannot be built from."""


@dataclass(frozen=True, slots=True)
class Change:
    """One change: ``target`` (a stage pattern, a channel ``SRC -> DST``, or ``""`` for the
    machine), ``attr`` (one of ``ATTRIBUTES``), ``value``; ``text`` as the user wrote it;
    ``function``: for ``speed``, the one function of the stage made faster (``speed[FUNC]``:
    its share of the stage's busy time only)."""

    target: str
    attr: str
    value: float
    text: str
    function: str = ""

    @classmethod
    def parse(cls, text: str) -> Change:
        m = re.fullmatch(
            r"\s*(?:(?P<target>.+?)\.)?(?P<attr>[a-z_]+)(?:\[(?P<function>[^\]]*)\])?\s*=\s*"
            r"(?P<value>\S+)\s*",
            text,
        )
        if m is None:
            raise WhatIfError(
                f"bad change {text!r}: write TARGET.ATTRIBUTE=VALUE, e.g. 'walk*.replicas=12', "
                "'avg.speed=2x', 'resize.speed[scale]=2x', 'avg -> print.capacity=128' or "
                "'cpus=4'"
            )
        target, attr, raw = (m.group("target") or "").strip(), m.group("attr"), m.group("value")
        if len(target) > 1 and target[0] == target[-1] and target[0] in "'\"":
            target = target[1:-1].strip()  # 'decode -> resize'.capacity=64, quoted whole
        if attr not in ATTRIBUTES:
            raise WhatIfError(
                f"bad change {text!r}: unknown attribute {attr!r}; one of "
                + ", ".join(f"{a} ({why})" for a, why in ATTRIBUTES.items())
            )
        num = raw[:-1] if attr == "speed" and raw.lower().endswith("x") else raw
        try:
            value = float(num)
        except ValueError:
            raise WhatIfError(f"bad change {text!r}: {raw!r} is not a number") from None
        whole = attr in ("replicas", "capacity", "cpus")
        if not (value > 0 and math.isfinite(value)) or (whole and value != int(value)):
            kind = "a whole number of at least 1" if whole else "a number above 0"
            raise WhatIfError(f"bad change {text!r}: {attr} must be {kind}, not {raw!r}")
        if (attr == "cpus") != (not target):
            raise WhatIfError(
                f"bad change {text!r}: "
                + ("cpus takes no target" if attr == "cpus" else f"{attr} needs a target")
            )
        if attr == "capacity" and "->" not in target:
            raise WhatIfError(f"bad change {text!r}: capacity is a channel's (SRC -> DST)")
        if attr in ("replicas", "speed") and "->" in target:
            raise WhatIfError(f"bad change {text!r}: {attr} is a stage's, not a channel's")
        function = (m.group("function") or "").strip()
        if m.group("function") is not None and (attr != "speed" or not function):
            raise WhatIfError(
                f"bad change {text!r}: only speed names a function, as STAGE.speed[FUNCTION]=2x"
            )
        return cls(target, attr, value, text.strip(), function)


@dataclass(frozen=True, slots=True)
class PipelineModel:
    """A run as a network: ``network`` (the unchanged model), ``topology`` (stages and
    channels as the model has them, replicas included), the run's measured figures
    (``throughput``: items/s the sources made while they ran; ``shares``: each stage's share of
    its working time busy, blocked in, blocked out; ``occupancy``: each channel's mean items),
    and ``assumed``: what the model took that the run did not measure, in words."""

    network: Network
    topology: Topology
    resources: dict[str, str]
    throughput: float
    shares: dict[str, tuple[float, float, float]]
    occupancy: dict[str, float]
    assumed: tuple[str, ...] = ()
    #: Each channel's share of the run's time at each level 0..capacity, from its occupancy
    #: histograms (where the run has them).
    levels: dict[str, np.ndarray] = field(default_factory=dict)
    #: A program run as it is (not a pipeline streamscope ran): its stages are pools of
    #: workers on shared queues, and more replicas are more workers on the same queues.
    program: bool = False
    #: A program's stages: how it runs each one's workers (``terms.worker_kind``).
    how: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Figures:
    """One model's figures over its replications: ``throughput`` (items/s the sources made while
    they ran; as predicted: scaled to the measured run), ``low``/``high`` its interval,
    ``busy``/``blocked_in``/``blocked_out`` per stage (shares of working time), ``occupancy``
    per channel (mean items), ``locks`` per interpreter and ``cores`` (utilisation), and
    ``limit``: the unit that limits the rate, in words (``bottleneck``: its label, ``""``
    where none downstream of the sources does)."""

    throughput: float
    low: float
    high: float
    busy: dict[str, float]
    blocked_in: dict[str, float]
    blocked_out: dict[str, float]
    occupancy: dict[str, float]
    locks: dict[str, float]
    cores: float
    bottleneck: str
    limit: str
    #: Each channel's share of time at each level 0..capacity.
    levels: dict[str, np.ndarray] = field(default_factory=dict)
    topology: Topology = field(default_factory=lambda: Topology("model"))

    def units(self) -> dict[str, tuple[str, ...]]:
        """Stages by unit (a stage, or replicas as ``walk*``), in topology order."""
        return {g.pattern: g.members for g in unit_groups(self.topology)}

    def channel_units(self) -> dict[str, tuple[str, ...]]:
        """Channels by the units they join (``split -> walk*``), in topology order."""
        unit = {m: pat for pat, ms in self.units().items() for m in ms}
        out: dict[str, list[str]] = {}
        for c in self.topology.channels:
            out.setdefault(f"{unit[c.src]} -> {unit[c.dst]}", []).append(c.name)
        return {k: tuple(v) for k, v in out.items()}


@dataclass(frozen=True, slots=True)
class Check:
    """The unchanged model against its run: ``verdict`` ``consistent`` or ``rejected``,
    ``throughput_error`` (relative), ``misses``: each figure it missed, in words."""

    verdict: str
    throughput_error: float
    allowed: float
    misses: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class WhatIf:
    """A what-if: the changes, the measured run's figures, the unchanged model's (``base``) and
    its self-check, and the prediction (``None`` when the self-check rejected the model)."""

    changes: tuple[Change, ...]
    measured: PipelineModel
    base: Figures
    check: Check
    predicted: Figures | None
    sentence: str
    assumed: tuple[str, ...] = field(default=())

    @property
    def gain(self) -> float | None:
        if self.predicted is None or not self.measured.throughput > 0:
            return None
        return self.predicted.throughput / self.measured.throughput - 1

    def to_dict(self) -> dict[str, Any]:
        m = self.measured
        out: dict[str, Any] = plain({
            "changes": [c.text for c in self.changes],
            "sentence": self.sentence,
            "measured": {"throughput": m.throughput, "shares": m.shares,
                         "occupancy": m.occupancy},
            "model": _figures_dict(self.base),
            "check": {"verdict": self.check.verdict, "throughput_error": self.check.throughput_error,
                      "allowed": self.check.allowed, "misses": list(self.check.misses)},
            "predicted": None if self.predicted is None else _figures_dict(self.predicted),
            "gain": self.gain,
            "assumed": list(self.assumed),
        })  # fmt: skip
        return out


def _figures_dict(f: Figures) -> dict[str, Any]:
    return {
        "throughput": f.throughput, "low": f.low, "high": f.high, "busy": f.busy,
        "blocked_in": f.blocked_in, "blocked_out": f.blocked_out, "occupancy": f.occupancy,
        "locks": f.locks, "cores": f.cores, "bottleneck": f.bottleneck, "limit": f.limit,
    }  # fmt: skip


def model_topology(net: Network, like: Topology) -> Topology:
    """The network's stages and channels as a topology (for grouping replicas)."""
    role = {}
    for s in net.stages:
        ins = any(s.name in (c.dst, *c.more_dst) for c in net.channels)
        outs = any(s.name in (c.src, *c.more_src) for c in net.channels)
        role[s.name] = "source" if not ins else "sink" if not outs else "stage"
    return Topology(
        name=like.name,
        stages=tuple(StageInfo(s.name, s.interpreter, role[s.name]) for s in net.stages),
        channels=tuple(ChannelInfo(c.name, c.src, c.dst, c.capacity) for c in net.channels),
    )


def unit_groups(topo: Topology) -> list[StageGroup]:
    """``stage_groups``, with the replicas a change made of a stage whose name has no number
    (``server``, ``server+1``, ...) in the group of that stage: ``server*``, labelled
    ``server ×2``."""
    groups = stage_groups(topo)
    base = {g.members[0]: g for g in groups if not g.replicas}
    copies: dict[str, list[str]] = {}
    for g in groups:
        head, plus, num = g.members[0].rpartition("+")
        if not g.replicas and plus and num.isdigit() and head in base:
            copies.setdefault(head, []).append(g.members[0])
    out = []
    for g in groups:
        name = g.members[0]
        if name in copies:
            members = (name, *copies[name])
            out.append(StageGroup(f"{name} ×{len(members)}", members, stem=name))
        elif not any(name in c for c in copies.values()):
            out.append(g)
    return out
