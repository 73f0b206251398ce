"""What if: the gain of a change predicted from one run, by simulating the pipeline it measured.

In: a ``Run`` of a pipeline that streamscope ran (its ``service`` and ``runner`` tables: each
stage's service times and CPU time per item; its topology; its stages' states; the monitor's
CPU), and changes (``Change.parse('walk*.replicas=12')``, ``'avg.speed=2x'``,
``'avg -> print.capacity=128'``, ``'cpus=4'``). Out: ``whatif(run, changes)``, a ``WhatIf``: the
model's self-check against the run it was built from, and (where the self-check holds) the
predicted throughput with an interval, each stage's states, each channel's occupancy and the
unit that would then limit the rate, beside the measured run.

The model (``model.network``): every stage a thread drawing its service time per item from its
measured samples (one item in 64, every item while they take 20 µs or more; at most 4096 a
stage), the CPU share of that time (its own code's CPU over wall, on some of those items)
holding its interpreter's lock and a core, plus the
runner's CPU per item (the thread's CPU time less its own code's) holding them too; outputs per
input as counted; channels with their capacities (a device's link: both its buffers, its
items handed out after the bus's transfer and latency); stages on threads of the pipeline's
process share one lock, those of one child process or device another; every process shares
the run's CPUs, with the monitor process, whose CPU time per item made is the run's.

A prediction is relative: the throughput predicted is the measured one times the ratio of the
changed model's to the unchanged model's, replication by replication with the same random
numbers (the interval: the 5th and 95th percentiles of that ratio over the replications, each
with its service samples drawn afresh). The unchanged model must first reproduce the run: its
throughput within the tolerance of the measured one (or of what the replications' spread
explains), each stage's busy share within ``STATE_TOLERANCE``, each channel's mean occupancy
within ``max(1 item, OCCUPANCY_TOLERANCE x capacity)``; a model that does not refuses to predict
and says which figure it missed.
"""

from __future__ import annotations

import fnmatch
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from streamscope.analysis.breakdown import channel_summary
from streamscope.analysis.context import BUSY_THRESHOLD
from streamscope.analysis.corewaits import core_waits, service_samples
from streamscope.analysis.groups import StageGroup, range_label, stage_groups
from streamscope.analysis.jsonable import plain
from streamscope.analysis.series import collect
from streamscope.core.errors import StreamscopeError
from streamscope.core.fmt import pct
from streamscope.core.topology import ChannelInfo, StageInfo, Topology
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    ChannelModel,
    Network,
    SimResult,
    StageModel,
    simulate,
)
from streamscope.store.reader import Run

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
#: Resource kinds whose stages are threads of the pipeline's own process (one lock).
_MAIN_KINDS = ("thread", "asyncio")


class WhatIfError(StreamscopeError):
    """A change that cannot be made, or a run the model cannot be built from."""


@dataclass(frozen=True, slots=True)
class Change:
    """One change: ``target`` (a stage pattern, a channel ``SRC -> DST``, or ``""`` for the
    machine), ``attr`` (one of ``ATTRIBUTES``), ``value``; ``text`` as the user wrote it."""

    target: str
    attr: str
    value: float
    text: str

    @classmethod
    def parse(cls, text: str) -> Change:
        m = re.fullmatch(
            r"\s*(?:(?P<target>.+?)\.)?(?P<attr>[a-z_]+)\s*=\s*(?P<value>\S+)\s*", text
        )
        if m is None:
            raise WhatIfError(
                f"bad change {text!r}: write TARGET.ATTRIBUTE=VALUE, e.g. 'walk*.replicas=12', "
                "'avg.speed=2x', 'avg -> print.capacity=128' or 'cpus=4'"
            )
        target, attr, raw = (m.group("target") or "").strip(), m.group("attr"), m.group("value")
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
        return cls(target, attr, value, text.strip())


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


# -- the model of a run -------------------------------------------------------------------


def pipeline_model(run: Run) -> PipelineModel:
    """The run as a ``PipelineModel``; ``WhatIfError`` where the run lacks what it needs."""
    topo = run.topology
    if not topo.stages:
        raise WhatIfError(f"{run.path or 'the run'}: no stages were seen; nothing to model")
    runner = _rows(run, "SELECT stage, items, samples, user_ns, cpu_ns, items_out, "
                        "user_wall_ns, runq_ns, switch_ns FROM runner")  # fmt: skip
    cols = run.columns("SELECT stage, wall_ns FROM service ORDER BY stage")
    samples: dict[str, list[int]] = {}
    for s, w in zip(cols.get("stage", []), cols.get("wall_ns", []), strict=True):
        samples.setdefault(str(s), []).append(int(w))
    lacking = [s.name for s in topo.stages if s.name not in runner]
    if lacking:
        raise WhatIfError(
            f"{run.path or 'the run'} has no service times for {', '.join(lacking)}: the what-if "
            "model needs each stage's, which a pipeline run by streamscope records (a program "
            "running its own threads or processes does not)"
        )
    kinds = {r.name: r.kind for r in topo.resources}
    interp = {s.name: "main" if kinds.get(s.resource, "thread") in _MAIN_KINDS else s.resource
              for s in topo.stages}  # fmt: skip
    groups = stage_groups(topo)
    stages = []
    assumed: list[str] = []
    for st in topo.stages:
        r = runner[st.name]
        pool_of = _group_of(groups, st.name)
        items = max(int(r["items"]), 1)
        cpu_item = r["cpu_ns"] / items
        pool = np.concatenate([np.asarray(samples.get(m, ()), dtype=np.float64) for m in pool_of])
        if not len(pool):  # too few items to have one timed: its CPU time per item stands in
            pool = np.array([cpu_item])
            assumed.append(f"{st.name} took too few items to have one timed: its CPU time per "
                           "item stands for its service time")  # fmt: skip
        if r["samples"] > 0 and r["user_wall_ns"] > 0:
            share = min(r["user_ns"] / r["user_wall_ns"], 1.0)
            own_cpu = r["user_ns"] / r["samples"]
        else:  # no item's CPU measured: the thread's CPU per item, its own code's at most
            own_cpu = min(cpu_item, float(pool.mean()))
            share = own_cpu / float(pool.mean()) if pool.mean() > 0 else 1.0
        overhead = max(cpu_item - own_cpu, 0.0)
        queued = r["runq_ns"] / r["cpu_ns"] if r["cpu_ns"] > 0 else 0.0
        pool, share = service_samples(
            pool, share, queued, own_cpu, one_core=r["user_ns"] <= r["user_wall_ns"]
        )
        role = "source" if not any(c.dst == st.name for c in topo.channels) else st.role
        ratio = (r["items_out"] / items) if role != "source" else 1.0
        stages.append(StageModel(
            st.name, pool, cpu_share=share, overhead_ns=overhead, ratio=ratio,
            interpreter=interp[st.name], fanout=st.fanout, fanin=st.fanin,
            items=int(r["items"]) if role == "source" else 0,
        ))  # fmt: skip
    channels = []
    for c in topo.channels:
        if c.is_link:
            channels.append(ChannelModel(c.name, c.src, c.dst, 2 * c.capacity,
                                         c.transfer_ns + c.latency_ns))  # fmt: skip
        else:
            channels.append(ChannelModel(c.name, c.src, c.dst, c.capacity))
    if any(c.is_link for c in topo.channels):
        assumed.append("a device's link is a FIFO of both its buffers whose items come out after "
                       "one transfer and its latency (no bulk gathering)")  # fmt: skip
    cpus = run.meta.cpus
    if cpus < 1:
        cpus = 1
        assumed.append("the run does not say how many CPUs it had: 1 assumed")
    made = sum(runner[s.name]["items"] for s in topo.stages
               if not any(c.dst == s.name for c in topo.channels))  # fmt: skip
    monitor = float(run.monitor_cost().get("cpu_ns") or 0) / max(made, 1)
    switch: dict[str, float] = {}
    for st in topo.stages:
        if runner[st.name]["switch_ns"] > 0:
            i = interp[st.name]
            switch[i] = max(switch.get(i, 0.0), runner[st.name]["switch_ns"])
    other = _other_load(run, runner, cpus)
    if other >= 0.05:
        assumed.append(f"other work kept {other:.2f} of the machine's {cpus} CPUs busy while the "
                       "stages ran (its busy CPU time less this run's), as it will in a rerun")  # fmt: skip
    net = Network(tuple(stages), tuple(channels), cores=cpus, monitor_ns_per_item=monitor,
                  switch_ns=switch, background_cores=other)  # fmt: skip
    shares, throughput = _measured_states(run, topo)
    net, slowed = core_waits(net, runner, shares)
    for name, (meas, sim) in slowed.items():
        assumed.append(f"{name} waited {pct(meas)} of its CPU time for a core against {pct(sim)} "
                       "in the model, whose cores are shared equally: its CPU time is taken as "
                       "that much longer (it computes all along, so it waited when preempted, "
                       "holding its lock)")  # fmt: skip
    net, locks = _calibrate_locks(net, shares, throughput)
    for name, g in locks.items():
        if g < 1:
            where = "the pipeline's process" if name == "main" else name
            assumed.append(f"{pct(g)} of the CPU time of the stages in {where} holds its "
                           "interpreter lock (what reproduces their measured states best)")  # fmt: skip
    summaries = channel_summary(run)
    occupancy = {
        cs.channel: float(cs.mean_occupancy)
        for cs in summaries
        if cs.mean_occupancy is not None and not cs.virtual
    }
    levels = _measured_levels(run, {cs.channel for cs in summaries if not cs.virtual})
    return PipelineModel(net, _model_topology(net, topo), {s.name: s.resource for s in topo.stages},
                         throughput, shares, occupancy, tuple(assumed), levels)  # fmt: skip


def _other_load(run: Run, runner: dict[str, dict[str, float]], cpus: int) -> float:
    """Cores that something other than this run kept busy while its stages ran (the machine's
    busy CPU time, ``machine``, less the stages' and the monitor's), 0 where not recorded."""
    _, rows = run.sql("SELECT sum(busy_ns), sum(wall_ns) FROM machine")
    if not rows or rows[0][0] is None or not rows[0][1]:
        return 0.0
    busy, wall = float(rows[0][0]), float(rows[0][1])
    own = sum(r["cpu_ns"] for r in runner.values()) + float(run.monitor_cost().get("cpu_ns") or 0)
    return float(min(max((busy - own) / wall, 0.0), cpus - 0.05))


def _calibrate_locks(
    net: Network, shares: dict[str, tuple[float, float, float]], throughput: float
) -> tuple[Network, dict[str, float]]:
    """Per interpreter shared by several stages, the share of their CPU time that holds its
    lock (``LOCK_SHARES``): the one whose model best reproduces the measured busy shares and
    throughput. Thread CPU time does not say which part held the lock (numpy and compiled
    code release it while they compute), and the states do: a stage that waits on the lock
    is busy longer."""
    chosen: dict[str, float] = {}
    for interp in sorted({s.interpreter for s in net.stages}):
        users = [s for s in net.stages if s.interpreter == interp]
        if len(users) < 2 or not any(s.cpu_share > 0 or s.overhead_ns > 0 for s in users):
            continue
        best: tuple[float, float, Network] | None = None
        for g in LOCK_SHARES:
            trial = replace(net, stages=tuple(
                replace(s, locked=g) if s.interpreter == interp else s for s in net.stages
            ))  # fmt: skip
            score = _misfit(trial, users, shares, throughput)
            if best is None or score < best[0] - LOCK_MARGIN:
                best = (score, g, trial)
        assert best is not None
        chosen[interp], net = best[1], best[2]
    return net, chosen


def _misfit(
    net: Network, users: Sequence[StageModel], shares: dict[str, tuple[float, float, float]],
    throughput: float,
) -> float:  # fmt: skip
    """How far a model is from the run: the worst busy-share error of ``users`` plus the
    relative throughput error, over two replications."""
    runs = [simulate(net, seed=1000 + i, resample=True) for i in range(2)]
    rate = float(np.mean([_rate(net, r) for r in runs]))
    worst = 0.0
    for s in users:
        if s.name in shares:
            busy = float(np.mean([r.shares(s.name)[BUSY] for r in runs]))
            worst = max(worst, abs(busy - shares[s.name][0]))
    return worst + abs(rate / throughput - 1)


def _measured_levels(run: Run, channels: set[str]) -> dict[str, np.ndarray]:
    """Each channel's share of time at each level, from its occupancy histograms summed over
    the frames (a bin's weight spread evenly over the levels it holds)."""
    caps = {c.name: c.capacity for c in run.topology.channels}
    out: dict[str, np.ndarray] = {}
    for sr in collect(run):
        if sr.query.metric != "occupancy" or sr.target not in channels or sr.target in out:
            continue
        cap = caps[sr.target]
        if cap < 1:  # no fixed capacity: its mean is compared
            continue
        acc = np.zeros(cap + 1)
        for h in sr.hists:
            if h is None:
                continue
            edges = np.asarray(h.edges, dtype=np.float64)
            w = np.nan_to_num(np.asarray(h.weights, dtype=np.float64))
            for lo, hi, wt in zip(edges[:-1], edges[1:], w, strict=True):
                ks = np.arange(math.ceil(lo), math.ceil(hi))
                ks = ks[(ks >= 0) & (ks <= cap)]
                if len(ks) and wt > 0:
                    acc[ks] += wt / len(ks)
            acc[0] += np.nan_to_num(h.under)
            if len(edges):
                acc[min(max(math.ceil(edges[-1]), 0), cap)] += np.nan_to_num(h.over)
        if acc.sum() > 0:
            out[sr.target] = acc / acc.sum()
    return out


def w1_levels(p: np.ndarray, q: np.ndarray) -> float:
    """The Wasserstein-1 distance (items) between two distributions over levels 0, 1, ..."""
    n = max(len(p), len(q))
    a, b = np.zeros(n), np.zeros(n)
    a[: len(p)], b[: len(q)] = p, q
    return float(np.abs(np.cumsum(a) - np.cumsum(b)).sum())


def _rows(run: Run, sql: str) -> dict[str, dict[str, float]]:
    cols, rows = run.sql(sql)
    return {str(r[0]): {c: float(v or 0) for c, v in zip(cols[1:], r[1:], strict=True)}
            for r in rows}  # fmt: skip


def _group_of(groups: Sequence[StageGroup], stage: str) -> tuple[str, ...]:
    for g in groups:
        if stage in g.members:
            return g.members
    return (stage,)


def _measured_states(
    run: Run, topo: Topology
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Each stage's share of its working time in busy, blocked_in, blocked_out (the ``worker``
    table, summed over its workers), and the items/s the sources made while they ran."""
    rows = _rows(run, "SELECT stage, sum(busy_ns), sum(blocked_in_ns), sum(blocked_out_ns) "
                      "FROM worker GROUP BY stage")  # fmt: skip
    runner = _rows(run, "SELECT stage, items FROM runner")
    shares: dict[str, tuple[float, float, float]] = {}
    rate = 0.0
    for st in topo.stages:
        r = rows.get(st.name)
        if r is None:
            continue
        b, i, o = (float(v) for v in r.values())
        work = b + i + o
        if work <= 0:
            continue
        shares[st.name] = (b / work, i / work, o / work)
        if not any(c.dst == st.name for c in topo.channels) and st.name in runner:
            rate += runner[st.name]["items"] / (work / 1e9)
    if not rate > 0:
        raise WhatIfError(
            f"{run.path or 'the run'}: its sources' states were not recorded, "
            "so how fast they made items is not known: run it again with a state(*) query (the "
            "default queries have one)"
        )
    return shares, rate


def _model_topology(net: Network, like: Topology) -> Topology:
    """The network's stages and channels as a topology (for grouping replicas)."""
    role = {}
    for s in net.stages:
        ins = any(c.dst == s.name for c in net.channels)
        outs = any(c.src == s.name for c in net.channels)
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


# -- changes ------------------------------------------------------------------------------


def apply_changes(model: PipelineModel, changes: Sequence[Change]) -> Network:
    """The model's network with ``changes`` made, in order."""
    net = model.network
    for ch in changes:
        net = _apply(net, ch)
    return net


def _apply(net: Network, ch: Change) -> Network:
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


# -- simulating and judging -----------------------------------------------------------------


class Predictor:
    """One run's model, its unchanged replications and self-check, made once; ``predict``
    then simulates each set of changes against them (the same random numbers)."""

    def __init__(
        self,
        run: Run,
        *,
        replications: int = REPLICATIONS,
        seed: int = 0,
        tolerance: float = THROUGHPUT_TOLERANCE,
    ) -> None:
        self.model = pipeline_model(run)
        self.seed, self.replications = seed, replications
        self.base_runs = [_sim(self.model.network, seed + i) for i in range(replications)]
        self.base = _figures(self.model.network, self.base_runs, self.model, scale=None)
        self.check = _check(self.model, self.base, self.base_runs, tolerance)

    def predict(self, changes: Sequence[str | Change]) -> WhatIf:
        chs = tuple(c if isinstance(c, Change) else Change.parse(c) for c in changes)
        model = self.model
        changed = apply_changes(model, chs)
        predicted = None
        if self.check.verdict == "consistent" and chs:
            new_runs = [_sim(changed, self.seed + i) for i in range(self.replications)]
            ratios = np.array([_rate(changed, b2) / _rate(model.network, b1)
                               for b1, b2 in zip(self.base_runs, new_runs, strict=True)])  # fmt: skip
            predicted = _figures(changed, new_runs, model, scale=ratios)
        sentence = _sentence(chs, model, self.check, predicted)
        return WhatIf(chs, model, self.base, self.check, predicted, sentence, model.assumed)

    def obvious(self, run: Run, found: Sequence[Any] = ()) -> list[WhatIf]:
        """The changes a reader of this run would try first: for each unit that a
        ``bottleneck`` finding of ``found`` names (or, without one, the busiest unit after the
        sources in the model), twice its replicas and twice its speed; for each channel full
        half the time or more, twice its capacity."""
        units = {g.pattern: g for g in stage_groups(self.model.topology)}
        named = [g for f in found if getattr(f, "kind", "") == "bottleneck"
                 for g in units.values() if range_label(g.members) == f.target]  # fmt: skip
        if not named:  # no bottleneck: the busiest unit after the sources, in the model
            inner = [g for g in units.values()
                     if any(c.dst in g.members for c in self.model.topology.channels)]  # fmt: skip
            busy = self.base.busy
            named = sorted(inner, key=lambda g: -float(np.mean([busy[m] for m in g.members])))[:1]
        changes: list[str] = []
        for g in named:
            n = len(g.members)
            changes.append(f"{g.pattern if n > 1 else g.members[0]}.replicas={2 * n}")
            changes.append(f"{g.pattern}.speed=2x")
        caps = {c.name: c.capacity for c in run.topology.channels}
        changes.extend(
            f"{cs.channel}.capacity={2 * caps[cs.channel]}"
            for cs in channel_summary(run)
            if cs.full_fraction is not None and cs.full_fraction >= 0.5 and cs.channel in caps
        )
        return [self.predict([c]) for c in dict.fromkeys(changes)]


def whatif(
    run: Run,
    changes: Sequence[str | Change],
    *,
    replications: int = REPLICATIONS,
    seed: int = 0,
    tolerance: float = THROUGHPUT_TOLERANCE,
) -> WhatIf:
    """The prediction for ``changes`` on ``run`` (see the module docstring)."""
    p = Predictor(run, replications=replications, seed=seed, tolerance=tolerance)
    return p.predict(changes)


def _sim(net: Network, seed: int) -> SimResult:
    r = simulate(net, seed=seed, resample=True)
    if not r.complete:
        raise WhatIfError(
            "the simulated pipeline stalled (every stage waiting on another) before its sources "
            "made their items: a cycle of channels the model cannot run"
        )
    return r


def _rate(net: Network, r: SimResult) -> float:
    """Items/s the sources made while they ran."""
    rate = 0.0
    for s in net.stages:
        if any(c.dst == s.name for c in net.channels):
            continue
        st = r.states[s.name]
        work = st[BUSY] + st[BLOCKED_IN] + st[BLOCKED_OUT]
        made = sum(len(r.put_times[c.name]) for c in net.channels if c.src == s.name)
        outs = sum(1 for c in net.channels if c.src == s.name)
        if s.fanout == "broadcast" and outs:
            made //= outs
        rate += made / (work / 1e9) if work > 0 else 0.0
    return rate


def _figures(
    net: Network, runs: Sequence[SimResult], model: PipelineModel, scale: np.ndarray | None
) -> Figures:
    rates = np.array([_rate(net, r) for r in runs])
    if scale is None:
        tp = float(np.median(rates))
        lo, hi = (float(q) for q in np.quantile(rates, [0.05, 0.95]))
    else:
        tp = model.throughput * float(np.median(scale))
        lo, hi = (model.throughput * float(q) for q in np.quantile(scale, [0.05, 0.95]))
    shares = {s.name: np.mean([r.shares(s.name) for r in runs], axis=0) for s in net.stages}
    occ = {c.name: float(np.mean([r.mean_occupancy(c.name) for r in runs])) for c in net.channels}
    levels = {c.name: np.mean([r.levels[c.name] / max(r.levels[c.name].sum(), 1e-300)
                               for r in runs], axis=0) for c in net.channels}  # fmt: skip
    locks = {k: float(np.mean([r.lock_busy[k] / r.end_ns for r in runs if r.end_ns > 0]))
             for k in runs[0].lock_busy}  # fmt: skip
    cores = float(np.mean([r.cores_busy / (r.end_ns * net.cores) for r in runs if r.end_ns > 0]))
    busy = {k: float(v[BUSY]) for k, v in shares.items()}
    label, limit = _limit(net, model, busy, locks, cores)
    return Figures(
        tp, lo, hi, busy,
        {k: float(v[BLOCKED_IN]) for k, v in shares.items()},
        {k: float(v[BLOCKED_OUT]) for k, v in shares.items()},
        occ, locks, cores, label, limit, levels=levels, topology=_model_topology(net, model.topology),
    )  # fmt: skip


def _limit(
    net: Network, model: PipelineModel, busy: dict[str, float], locks: dict[str, float],
    cores: float,
) -> tuple[str, str]:  # fmt: skip
    """The unit that limits the rate (as the bottleneck pass names it), in words: the busiest
    unit after the sources if it is busy most of the time; else, where the threads of one
    process keep its interpreter lock busy, the busiest unit among them (waiting for the lock
    between items shows as waiting on channels: the bottleneck pass's rule too)."""
    topo = _model_topology(net, model.topology)
    uses = {s.name: s.interpreter for s in net.stages}
    shared = {
        name: held for name, held in locks.items()
        if held >= BUSY_THRESHOLD and sum(1 for i in uses.values() if i == name) > 1
    }  # fmt: skip
    units = [
        (float(np.mean([busy[m] for m in g.members])), g)
        for g in unit_groups(topo)
        if not all(topo.stage(m).role == "source" for m in g.members)
    ]
    best = max(units, key=lambda u: u[0], default=None)
    if best is not None and best[0] < BUSY_THRESHOLD:
        on_lock = [u for u in units if any(uses[m] in shared for m in u[1].members)]
        best = max(on_lock, key=lambda u: u[0], default=None)
        if best is not None:
            name = uses[best[1].members[0]]
            return best[1].label, (
                f"{best[1].label} limits the rate through the interpreter lock of "
                f"{_process(name)} (held {pct(shared[name])} of the time)"
            )
    if best is None:
        return "", "the sources limit the rate: no stage downstream is busy most of the time"
    label = best[1].label
    why = f"{label} limits the rate (busy {pct(best[0])})"
    mine = [n for n in shared if any(uses[m] == n for m in best[1].members)]
    if mine:
        name = max(mine, key=lambda n: shared[n])
        why += f", waiting on the interpreter lock of {_process(name)} (held {pct(shared[name])} of the time)"
    elif cores >= BUSY_THRESHOLD:
        why += f", the CPUs busy {pct(cores)}"
    return label, why


def _process(interpreter: str) -> str:
    return (
        "the pipeline's process" if interpreter == "main" else interpreter.split("+", maxsplit=1)[0]
    )


def _check(model: PipelineModel, base: Figures, runs: Sequence[SimResult], tol: float) -> Check:
    rates = np.array([_rate(model.network, r) for r in runs])
    err = base.throughput / model.throughput - 1
    spread = float(np.std(rates) / np.mean(rates)) if len(rates) > 1 else 0.0
    allowed = max(tol, 2 * spread)
    misses = []
    if abs(err) > allowed:
        misses.append(f"throughput {base.throughput:,.1f}/s against {model.throughput:,.1f}/s "
                      f"measured ({err:+.1%}; {allowed:.0%} allowed)")  # fmt: skip
    for stage, (b, _i, _o) in model.shares.items():
        if stage in base.busy and abs(base.busy[stage] - b) > STATE_TOLERANCE:
            misses.append(f"{stage} busy {pct(base.busy[stage])} against {pct(b)} measured")
    caps = {c.name: c.capacity for c in model.network.channels}
    for name, occ in model.occupancy.items():
        if name not in base.occupancy or name not in caps:
            continue
        allowed_items = max(1.0, OCCUPANCY_TOLERANCE * caps[name])
        if name in model.levels and name in base.levels:
            # The whole distribution: W1 is at least the difference of the means.
            w1 = w1_levels(model.levels[name], base.levels[name])
            if w1 > allowed_items:
                misses.append(f"{name}'s occupancy is {w1:.1f} items (W1) from the measured "
                              f"distribution (mean {base.occupancy[name]:.1f} against {occ:.1f}; "
                              f"{allowed_items:.1f} allowed)")  # fmt: skip
        elif abs(base.occupancy[name] - occ) > allowed_items:
            misses.append(f"{name} holds {base.occupancy[name]:.1f} items against {occ:.1f} "
                          f"measured ({allowed_items:.1f} allowed)")  # fmt: skip
    return Check("rejected" if misses else "consistent", err, allowed, tuple(misses))


def _sentence(
    chs: Sequence[Change], model: PipelineModel, check: Check, pred: Figures | None
) -> str:
    if check.verdict != "consistent":
        return ("The model does not reproduce this run, so it predicts nothing: "
                + "; ".join(check.misses) + ".")  # fmt: skip
    if pred is None:
        return (f"The model reproduces this run (throughput {check.throughput_error:+.1%}); "
                "give a change to predict (--set).")  # fmt: skip
    gain = pred.throughput / model.throughput - 1
    half = max(pred.high - pred.throughput, pred.throughput - pred.low) / model.throughput
    what = ", ".join(c.text for c in chs)
    then = f"then {pred.limit}" if pred.bottleneck else pred.limit
    return (f"{what}: {model.throughput:,.1f} → {pred.throughput:,.1f} items/s, "
            f"{gain:+.0%} (±{half:.0%}); {then}.")  # fmt: skip
