"""The model of a run of a pipeline streamscope ran: each stage's service samples, CPU share,
overhead and interpreter, the channels, the machine's CPUs and other load, the monitor's cost;
the waits for a core and the interpreter locks calibrated against the run's states; the run's
measured figures to check it against (``pipeline_model``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from streamscope.analysis.breakdown import channel_summary
from streamscope.analysis.corewaits import core_waits, service_samples, waits_taken
from streamscope.analysis.groups import StageGroup, stage_groups
from streamscope.analysis.series import collect
from streamscope.analysis.whatif.kinds import (
    LOCK_MARGIN,
    LOCK_SHARES,
    PipelineModel,
    WhatIfError,
    model_topology,
)
from streamscope.analysis.whatif.programrun import (
    ProgramInputs,
    program_inputs,
    program_states,
    rate_stages,
    sinks_rate,
    split_clients,
)
from streamscope.core.fmt import pct
from streamscope.core.topology import Topology
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    DEFAULT_SWITCH_NS,
    ChannelModel,
    Network,
    SimResult,
    StageModel,
    putters,
    simulate,
    takers,
)
from streamscope.store.reader import Run

#: Resource kinds whose stages are threads of the pipeline's own process (one lock).
MAIN_KINDS = ("thread", "asyncio")


def pipeline_model(run: Run) -> PipelineModel:
    """The run as a ``PipelineModel``; ``WhatIfError`` where the run lacks what it needs."""
    topo = run.topology
    if not topo.stages:
        raise WhatIfError(f"{run.path or 'the run'}: no stages were seen; nothing to model")
    runner = _rows(run, "SELECT stage, items, samples, user_ns, cpu_ns, items_out, "
                        "user_wall_ns, runq_ns, switch_ns FROM runner")  # fmt: skip
    prog = program_inputs(run) if not runner else ProgramInputs()
    if prog.runner:  # a program run as it is: its workers' trackers timed its items
        runner, samples = prog.runner, prog.samples
    else:
        samples = _pipeline_samples(run)
    lacking = [s.name for s in topo.stages if s.name not in runner]
    if lacking:
        raise WhatIfError(
            f"{run.path or 'the run'} has no service times for {', '.join(lacking)}: the what-if "
            "model needs each stage's, which a pipeline run by streamscope records"
        )
    kinds = {r.name: r.kind for r in topo.resources}
    interp = {s.name: "main" if kinds.get(s.resource, "thread") in MAIN_KINDS else s.resource
              for s in topo.stages}  # fmt: skip
    groups = stage_groups(topo) if not prog.runner else []
    stages = []
    assumed: list[str] = list(prog.assumed)
    taken: set[str] = set()  # the stages whose waits for a core are out of their samples
    linked = {n for c in topo.channels for n in (*topo.producers(c), *topo.consumers(c))}
    for st in topo.stages:
        if prog.runner and st.name not in linked:  # a program's thread no queue joins
            assumed.append(f"{st.name} put into and took from no queue: not modelled")
            continue
        r = runner[st.name]
        pool_of = _group_of(groups, st.name)
        items = max(int(r["items"]), 1)
        cpu_item = r["cpu_ns"] / items
        pool = np.concatenate([np.asarray(samples.get(m, ()), dtype=np.float64) for m in pool_of])
        if not len(pool):  # too few items to have one timed: its CPU time per item stands in
            pool = np.array([cpu_item])
            assumed.append(f"{st.name} took too few items to have one timed: its CPU time per "
                           "item stands for its service time")  # fmt: skip
        if st.name in prog.tasks:  # an asyncio task: its loop's CPU time is not its own
            share, own_cpu = 0.0, 0.0
        elif r["samples"] > 0 and r["user_wall_ns"] > 0:
            share = min(r["user_ns"] / r["user_wall_ns"], 1.0)
            own_cpu = r["user_ns"] / r["samples"]
        else:  # no item's CPU measured: the thread's CPU per item, its own code's at most
            own_cpu = min(cpu_item, float(pool.mean()))
            share = own_cpu / float(pool.mean()) if pool.mean() > 0 else 1.0
        overhead = max(cpu_item - own_cpu, 0.0)
        queued = r["runq_ns"] / r["cpu_ns"] if r["cpu_ns"] > 0 else 0.0
        if waits_taken(share, queued):
            taken.add(st.name)
        pool, share = service_samples(
            pool, share, queued, own_cpu, one_core=r["user_ns"] <= r["user_wall_ns"]
        )
        role = "source" if not any(st.name in topo.consumers(c) for c in topo.channels) else st.role
        ratio = (r["items_out"] / items) if role != "source" else 1.0
        stages.append(StageModel(
            st.name, pool, cpu_share=share, overhead_ns=overhead, ratio=ratio,
            interpreter=interp[st.name], fanout=st.fanout, fanin=st.fanin,
            items=int(r["items"]) if role == "source" else 0,
            workers=prog.workers.get(st.name, 1), own_interpreters=st.name in prog.own,
            start_ns=prog.start.get(st.name, 0.0),
        ))  # fmt: skip
    channels = []
    for c in topo.channels:
        if c.is_link:
            channels.append(ChannelModel(c.name, c.src, c.dst, 2 * c.capacity,
                                         c.transfer_ns + c.latency_ns))  # fmt: skip
        else:
            channels.append(ChannelModel(c.name, c.src, c.dst,
                                         prog.capacity.get(c.name, c.capacity),
                                         more_src=topo.producers(c)[1:],
                                         more_dst=topo.consumers(c)[1:]))  # fmt: skip
    if prog.runner:  # a client (handing work on, taking results back) made source and sink
        before = len(prog.assumed)
        stages, channels = split_clients(stages, channels, prog)
        assumed += prog.assumed[before:]
    if any(c.is_link for c in topo.channels):
        assumed.append("a device's link is a FIFO of both its buffers whose items come out after "
                       "one transfer and its latency (no bulk gathering)")  # fmt: skip
    cpus = run.meta.cpus
    if cpus < 1:
        cpus = 1
        assumed.append("the run does not say how many CPUs it had: 1 assumed")
    made = sum(runner[s.name]["items"] for s in topo.stages
               if not any(s.name in topo.consumers(c) for c in topo.channels))  # fmt: skip
    monitor = float(run.monitor_cost().get("cpu_ns") or 0) / max(made, 1)
    switch: dict[str, float] = {}
    for st in topo.stages:
        if runner[st.name]["switch_ns"] > 0:
            i = interp[st.name]
            switch[i] = max(switch.get(i, 0.0), runner[st.name]["switch_ns"])
    # a program's machine row is already net of its own and the monitor's CPU time
    other = _other_load(run, runner, cpus, net_of_own=bool(prog.runner))
    if other >= 0.05:
        assumed.append(f"other work kept {other:.2f} of the machine's {cpus} CPUs busy while the "
                       "stages ran (its busy CPU time less this run's), as it will in a rerun")  # fmt: skip
    net = Network(tuple(stages), tuple(channels), cores=cpus, monitor_ns_per_item=monitor,
                  switch_ns=switch, background_cores=other)  # fmt: skip
    if prog.runner:
        before = len(prog.assumed)
        shares, throughput = program_states(run, net, prog)
        net = replace(net, rate_at=rate_stages(net, prog.items))
        assumed += prog.assumed[before:]
    else:
        shares, throughput = _measured_states(run, topo, runner)
    net, slowed = core_waits(net, runner, shares, frozenset(taken))
    for name, (meas, sim, held) in slowed.items():
        if held:
            assumed.append(f"{name} waited {pct(meas)} of its CPU time for a core, which its "
                           f"service times hold; the model's waits, {pct(sim)}, would come on "
                           "top: its CPU time is taken as that much shorter")  # fmt: skip
        elif meas > sim:
            assumed.append(f"{name} waited {pct(meas)} of its CPU time for a core against "
                           f"{pct(sim)} in the model, whose cores are shared equally: its CPU "
                           "time is taken as that much longer (it computes all along, so it "
                           "waited when preempted, holding its lock)")  # fmt: skip
        else:
            assumed.append(f"{name} waited {pct(meas)} of its CPU time for a core against "
                           f"{pct(sim)} in the model, whose other load comes at random: its CPU "
                           "time is taken as that much shorter (what else ran kept mostly to "
                           "other cores than its)")  # fmt: skip
    net, locks, waited = _calibrate_locks(net, shares, throughput, bool(prog.runner))
    for name in waited:
        assumed.append(f"{name}'s own code waited less than a switch interval an item: those "
                       "waits are taken for waits on the interpreter lock, which the model makes "
                       "(what reproduces the measured states best)")  # fmt: skip
    for name, g in locks.items():
        if g < 1:
            where = "the pipeline's process" if name == "main" else name
            assumed.append(f"{pct(g)} of the CPU time of the stages in {where} holds its "
                           "interpreter lock (what reproduces their measured states best)")  # fmt: skip
    summaries = channel_summary(run)
    # Not compared: a client's results (when it took them is not modelled), a queue with no
    # bound (its bound in the model is the most it held)
    unmatched = {c.name for c in net.channels if c.dst in prog.split.values()} | prog.unbounded
    occupancy = {
        cs.channel: float(cs.mean_occupancy)
        for cs in summaries
        if cs.mean_occupancy is not None and not cs.virtual and cs.channel not in unmatched
    }
    levels = _measured_levels(run, {cs.channel for cs in summaries if not cs.virtual})
    return PipelineModel(net, model_topology(net, topo), {s.name: s.resource for s in topo.stages},
                         throughput, shares, occupancy, tuple(assumed), levels,
                         program=bool(prog.runner), how=prog.how)  # fmt: skip


def _pipeline_samples(run: Run) -> dict[str, list[int]]:
    """Each stage's service samples as its runner timed them."""
    cols = run.columns("SELECT stage, wall_ns FROM service ORDER BY stage")
    samples: dict[str, list[int]] = {}
    for s, w in zip(cols.get("stage", []), cols.get("wall_ns", []), strict=True):
        samples.setdefault(str(s), []).append(int(w))
    return samples


def _other_load(
    run: Run, runner: dict[str, dict[str, float]], cpus: int, net_of_own: bool = False
) -> float:
    """Cores that something other than this run kept busy while its stages ran (the machine's
    busy CPU time, ``machine``, less the stages' and the monitor's), 0 where not recorded."""
    _, rows = run.sql("SELECT sum(busy_ns), sum(wall_ns) FROM machine")
    if not rows or rows[0][0] is None or not rows[0][1]:
        return 0.0
    busy, wall = float(rows[0][0]), float(rows[0][1])
    own = sum(r["cpu_ns"] for r in runner.values()) + float(run.monitor_cost().get("cpu_ns") or 0)
    if net_of_own:  # a program's (``run_program``)
        own = 0.0
    return float(min(max((busy - own) / wall, 0.0), cpus - 0.05))


def _calibrate_locks(
    net: Network, shares: dict[str, tuple[float, float, float]], throughput: float,
    program: bool = False,
) -> tuple[Network, dict[str, float], list[str]]:  # fmt: skip
    """Per interpreter shared by several stages, the share of their CPU time that holds its
    lock (``LOCK_SHARES``): the one whose model best reproduces the measured busy shares and
    throughput. Thread CPU time does not say which part held the lock (numpy and compiled
    code release it while they compute), and the states do: a stage that waits on the lock
    is busy longer. Each share is tried with the stages' own waits as measured and, where a
    stage's own code waited less than a switch interval an item (``_lock_waits``), with those
    waits taken for waits on the lock (which the model makes of its own): a wait of a few
    microseconds an item beside a thread that computes is a thread that wanted the lock, not
    a sleep, after which it would want the lock back and wait up to a switch interval more.
    Out: the network, each interpreter's share, the stages whose waits were taken so."""
    chosen: dict[str, float] = {}
    waits: list[str] = []
    for interp in sorted({s.interpreter for s in net.stages}):
        users = [s for s in net.stages if s.interpreter == interp]
        if len(users) < 2 or not any(s.cpu_share > 0 or s.overhead_ns > 0 for s in users):
            continue
        short = _lock_waits(users, net.switch_ns.get(interp, DEFAULT_SWITCH_NS))
        best: tuple[float, float, Network, tuple[str, ...]] | None = None
        for g in LOCK_SHARES:
            for taken in ((), tuple(short)) if short else ((),):
                trial = replace(net, stages=tuple(
                    short[s.name] if s.name in taken else s for s in net.stages
                ))  # fmt: skip
                trial = replace(trial, stages=tuple(
                    replace(s, locked=g) if s.interpreter == interp else s for s in trial.stages
                ))  # fmt: skip
                score = _misfit(trial, users, shares, throughput, program)
                if best is None or score < best[0] - LOCK_MARGIN:
                    best = (score, g, trial, taken)
        assert best is not None
        chosen[interp], net = best[1], best[2]
        waits += best[3]
    return net, chosen, waits


def _lock_waits(users: Sequence[StageModel], switch_ns: float) -> dict[str, StageModel]:
    """The stages whose own code waited (wall time beyond its CPU time) less than
    ``switch_ns`` an item on average, each with those waits taken out (its samples its CPU
    time, all of it CPU time)."""
    out: dict[str, StageModel] = {}
    for s in users:
        if not 0 < s.cpu_share < 1 or not len(s.service):
            continue
        if float(s.service.mean()) * (1 - s.cpu_share) < switch_ns:
            out[s.name] = replace(s, service=s.service * s.cpu_share, cpu_share=1.0)
    return out


def _misfit(
    net: Network, users: Sequence[StageModel], shares: dict[str, tuple[float, float, float]],
    throughput: float, program: bool,
) -> float:  # fmt: skip
    """How far a model is from the run: the worst busy-share error of ``users`` plus the
    relative throughput error, over two replications."""
    runs = [simulate(net, seed=1000 + i, resample=True) for i in range(2)]
    rate = float(np.mean([rate_of(net, r, program) for r in runs]))
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
    run: Run, topo: Topology, runner: dict[str, dict[str, float]]
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Each stage's share of its working time in busy, blocked_in, blocked_out (the ``worker``
    table, summed over its workers), and the items/s the sources made while they ran."""
    rows = _rows(run, "SELECT stage, sum(busy_ns), sum(blocked_in_ns), sum(blocked_out_ns), "
                      "count(*) FROM worker GROUP BY stage")  # fmt: skip
    shares: dict[str, tuple[float, float, float]] = {}
    rate = 0.0
    for st in topo.stages:
        r = rows.get(st.name)
        if r is None:
            continue
        b, i, o, n = (float(v) for v in r.values())
        work = b + i + o
        if work <= 0:
            continue
        shares[st.name] = (b / work, i / work, o / work)
        if not any(c.dst == st.name for c in topo.channels) and st.name in runner:
            # a source of several workers (a program's): their working time side by side
            rate += runner[st.name]["items"] / (work / n / 1e9)
    if not rate > 0:
        raise WhatIfError(
            f"{run.path or 'the run'}: its sources' states were not recorded, "
            "so how fast they made items is not known: run it again with a state(*) query (the "
            "default queries have one)"
        )
    return shares, rate


def rate_of(net: Network, r: SimResult, program: bool) -> float:
    """The run's rate as the model measures it: a program's sinks' (``sinks_rate``), a
    pipeline's sources' (``sources_rate``)."""
    return sinks_rate(net, r) if program else sources_rate(net, r)


def sources_rate(net: Network, r: SimResult) -> float:
    """Items/s the sources made while they ran."""
    rate = 0.0
    for s in net.stages:
        if any(s.name in takers(c) for c in net.channels):
            continue
        st = r.states[s.name]
        work = st[BUSY] + st[BLOCKED_IN] + st[BLOCKED_OUT]
        made = sum(len(r.put_times[c.name]) for c in net.channels if c.src == s.name)
        outs = sum(1 for c in net.channels if s.name in putters(c))
        if s.fanout == "broadcast" and outs:
            made //= outs
        rate += made / (work / s.workers / 1e9) if work > 0 else 0.0
    return rate
