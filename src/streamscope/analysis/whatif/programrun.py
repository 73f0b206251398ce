"""What the what-if model takes from the run of a program run as it is: each stage's service
samples as its workers' trackers timed them, its items in and out as its queues counted them,
its workers and whose interpreter each runs in (``program_inputs``).

In: a run whose stages no streamscope runner ran (no ``runner`` rows): the ``service`` table's
(wall, CPU) pairs, the ``worker`` table, the channels' throughput frames and capacities. Out:
the figures ``runmodel.pipeline_model`` builds stages from, as a pipeline's runner gives them,
with a program's own: how many workers each stage has and whether each has an interpreter of
its own (a process), and the capacity an unbounded queue is modelled with.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from streamscope.analysis.breakdown import channel_summary
from streamscope.analysis.series import collect
from streamscope.analysis.whatif.kinds import WhatIfError
from streamscope.analysis.whatif.terms import worker_kind
from streamscope.core.topology import ChannelInfo
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    ChannelModel,
    Network,
    SimResult,
    StageModel,
    putters,
    takers,
)
from streamscope.store.reader import Run

#: The stage of a program's main thread (``pipeline.program.auto.stages.MAIN``).
MAIN = "main"
#: Resource kinds whose workers run in the program's own process (one interpreter lock).
SHARED_KINDS = ("thread", "asyncio")


@dataclass(slots=True)
class ProgramInputs:
    """Per stage: ``runner`` (the figures of ``runmodel``'s runner rows: items, samples,
    user_ns, cpu_ns, items_out, user_wall_ns, runq_ns, switch_ns), ``samples`` (wall ns of its
    timed items), ``workers``, ``own`` (stages whose workers are processes, an interpreter
    each), ``tasks`` (stages of asyncio tasks, whose CPU time is their loop's); per channel
    its ``capacity`` in the model; ``assumed``, in words."""

    runner: dict[str, dict[str, float]] = field(default_factory=dict)
    samples: dict[str, list[int]] = field(default_factory=dict)
    workers: dict[str, int] = field(default_factory=dict)
    own: set[str] = field(default_factory=set)
    tasks: set[str] = field(default_factory=set)
    capacity: dict[str, int] = field(default_factory=dict)
    assumed: list[str] = field(default_factory=list)
    #: How the program runs each stage's workers (``terms.worker_kind``).
    how: dict[str, str] = field(default_factory=dict)
    #: Items through each channel over the run.
    items: dict[str, float] = field(default_factory=dict)
    #: Each stage the model split in two (``split_clients``): its results side, by name.
    split: dict[str, str] = field(default_factory=dict)
    #: Each stage's share of its working time busy.
    busy: dict[str, float] = field(default_factory=dict)
    #: The queues with no bound (modelled with the most each held).
    unbounded: set[str] = field(default_factory=set)
    #: How long after the first stage each stage began (ns: its workers' first records, their
    #: mean): a process pool's workers begin when it forks them, some tens of ms after the
    #: first call handed to them, and the run's rate and occupancy hold that wait.
    start: dict[str, float] = field(default_factory=dict)


def channel_items(run: Run) -> dict[str, float]:
    """Items through each channel over the run, from its throughput frames (rate x the time
    each frame observed)."""
    out: dict[str, float] = {}
    for sr in collect(run):
        if sr.query.metric != "throughput" or sr.target in out or "mean" not in sr.scalars:
            continue
        rate = np.nan_to_num(sr.scalars["mean"])
        out[sr.target] = float((rate * sr.covered / 1e9).sum())
    return out


def _shares_of_put(
    channels: Sequence[ChannelInfo], producers: Callable[[ChannelInfo], tuple[str, ...]],
    busy: dict[str, float], pairs: dict[str, list[tuple[int, int | None]]],
) -> dict[tuple[str, str], float]:  # fmt: skip
    """Of a queue several stages put into, each one's share of its items: as many as its
    busy time makes at its mean time per item (the queue counts them all together)."""
    out: dict[tuple[str, str], float] = {}
    for c in channels:
        who = producers(c)
        if len(who) < 2:
            continue
        made = {}
        for s in who:
            walls = [w for w, _ in pairs.get(s, [])]
            made[s] = busy.get(s, 0.0) / float(np.mean(walls)) if walls else 0.0
        total = sum(made.values())
        for s in who:
            out[(c.name, s)] = made[s] / total if total > 0 else 1.0 / len(who)
    return out


def program_inputs(run: Run) -> ProgramInputs:
    """The model's inputs from a program's run; ``WhatIfError`` naming what it lacks."""
    topo = run.topology
    where = run.path or "the run"
    cols = run.columns("SELECT stage, wall_ns, cpu_ns, runq_ns FROM service ORDER BY stage")
    pairs: dict[str, list[tuple[int, int | None]]] = {}
    runq: dict[str, list[int]] = {}
    for s, w, c, q in zip(cols.get("stage", []), cols.get("wall_ns", []),
                          cols.get("cpu_ns", []), cols.get("runq_ns", []), strict=True):  # fmt: skip
        pairs.setdefault(str(s), []).append((int(w), None if c is None else int(c)))
        if c is not None and q is not None:
            runq.setdefault(str(s), []).append(int(q))
    _, wrows = run.sql("SELECT stage, resource, busy_ns, busy_ns + blocked_in_ns + "
                       "blocked_out_ns, began_ns FROM worker")  # fmt: skip
    busy: dict[str, float] = {}
    began: dict[str, list[int]] = {}
    worked: dict[str, float] = {}
    resources: dict[str, list[str]] = {}
    for stage, res, b, w, t0 in wrows:
        resources.setdefault(str(stage), []).append(str(res))
        if t0 is not None and t0 >= 0:
            began.setdefault(str(stage), []).append(int(t0))
        busy[str(stage)] = busy.get(str(stage), 0.0) + float(b or 0)
        worked[str(stage)] = worked.get(str(stage), 0.0) + float(w or 0)
    lacking = [s.name for s in topo.stages if not pairs.get(s.name) and s.name not in busy]
    if lacking:
        raise WhatIfError(
            f"{where} has no service times for {', '.join(lacking)}: the what-if model needs "
            "each stage's, which its workers' state probes time (a state(*) query watching "
            "them; the default queries have one)"
        )
    items = channel_items(run)
    unseen = [c.name for c in topo.channels if c.name not in items]
    if unseen:
        raise WhatIfError(
            f"{where}: how many items went through {', '.join(unseen)} was not recorded: run "
            "it again with a throughput(* -> *) query (the default queries have one)"
        )
    kinds = {r.name: r.kind for r in topo.resources}
    out = ProgramInputs(items=items)
    out.busy = {s: busy[s] / worked[s] for s in busy if worked.get(s, 0) > 0}
    first = {s: float(np.mean(t)) for s, t in began.items()}
    out.start = {s: t - min(first.values()) for s, t in first.items()}
    for s, t in sorted(out.start.items()):
        if t >= 1e6:
            out.assumed.append(f"{s} began {t / 1e6:.0f} ms after the first stage (its workers' "
                               "first records): in the model too")  # fmt: skip
    share = _shares_of_put(topo.channels, topo.producers, busy, pairs)
    for st in topo.stages:
        ins = [c for c in topo.channels if st.name in topo.consumers(c)]
        outs = [c for c in topo.channels if st.name in topo.producers(c)]
        made = sum(items[c.name] * share.get((c.name, st.name), 1.0) for c in outs)
        if st.fanout == "broadcast" and outs:
            made /= len(outs)
        took = sum(items[c.name] for c in ins) if ins else made
        mine = pairs.get(st.name, [])
        timed = [(w, c) for w, c in mine if c is not None]
        out.samples[st.name] = [w for w, _ in mine]
        if not mine:  # none of its items timed (it hands work on and takes results through
            # calls, not queues): its busy time per item stands for its service time
            per = busy.get(st.name, 0.0) / max(took + made if ins and outs else took, 1.0)
            out.samples[st.name] = [int(per)]
            out.assumed.append(f"{st.name}'s items were not timed (it hands them on and takes "
                               "them through calls): its busy time per item stands for its "
                               "service time")  # fmt: skip
        res = resources.get(st.name, [st.resource])
        out.workers[st.name] = max(len(res), 1)
        rk = {kinds.get(r, "thread") for r in res}
        out.how[st.name] = worker_kind(min(rk), res)
        if rk - set(SHARED_KINDS):
            out.own.add(st.name)
        if "asyncio" in rk or not timed:
            out.tasks.add(st.name)
        user = float(sum(c for _, c in timed))
        user_wall = float(sum(w for w, _ in timed))
        cpu_item = user / len(timed) if timed else 0.0
        # its waits for a core per CPU ns, as its timed items had them (the model takes them
        # out where it shares the cores itself, and puts back what it lacks: ``corewaits``)
        queued = sum(runq.get(st.name, ())) / user if user > 0 else 0.0
        out.runner[st.name] = {
            "items": took, "samples": float(len(timed)), "user_ns": user, "cpu_ns": cpu_item * took,
            "items_out": made, "user_wall_ns": user_wall, "runq_ns": queued * cpu_item * took,
            "switch_ns": 0.0,
        }  # fmt: skip
    most = {cs.channel: cs.max_occupancy for cs in channel_summary(run)}
    for c in topo.channels:
        if c.capacity >= 1:
            out.capacity[c.name] = c.capacity
            continue
        out.unbounded.add(c.name)
        top = most.get(c.name)
        paced = any(out.busy.get(p, 1.0) < 1 - WAITED for p in topo.producers(c))
        if paced and top is not None and top >= 1:
            out.capacity[c.name] = max(int(top), 1)
            out.assumed.append(
                f"{c.name} has no bound, and what put items in it waited on something: "
                f"modelled as holding the most it held in the run, {out.capacity[c.name]:,} "
                "(what put items in it ran no further ahead); its occupancy is not compared"
            )
            continue
        out.capacity[c.name] = max(int(items[c.name]) + 1, 1)
        out.assumed.append(f"{c.name} has no bound: modelled as holding every item that went "
                           "through it; its occupancy is not compared")  # fmt: skip
    if out.tasks:
        out.assumed.append(
            f"{', '.join(sorted(out.tasks))}: asyncio tasks, whose CPU time is their loop's "
            "(not read per task): their service times hold no core and no lock in the model"
        )
    many = {s: n for s, n in out.workers.items() if n > 1}
    for s, n in sorted(many.items()):
        how = "processes" if s in out.own else "workers"
        out.assumed.append(f"{s} runs as {n} {how} taking from the same queue, each drawing "
                           "from the service times of all of them")  # fmt: skip
    return out


#: A source that waited for input this share of its time or more (for results it takes through
#: calls, which no channel shows) is not held to its busy share.
WAITED = 0.2
#: The name of the side of a client stage that takes the results back (``split_clients``).
RESULTS = "{} (results)"


def _reaches(channels: Sequence[ChannelModel], start: str, goal: str) -> bool:
    """Whether a path of channels leads from stage ``start`` to stage ``goal``."""
    seen, todo = {start}, [start]
    while todo:
        at = todo.pop()
        for c in channels:
            if at not in putters(c):
                continue
            for d in takers(c):
                if d == goal:
                    return True
                if d not in seen:
                    seen.add(d)
                    todo.append(d)
    return False


def split_clients(
    stages: list[StageModel], channels: list[ChannelModel], prog: ProgramInputs
) -> tuple[list[StageModel], list[ChannelModel]]:
    """A client stage (one that hands items to a pool or to other stages and takes the results
    back: the channels from it lead back to it) made two: itself, a source of what it hands on
    (it makes them one after the other, as a program hands a pool its work), and
    ``RESULTS.format(name)``, a sink of what comes back; the simulation runs no cycle of
    channels. Of the stages on a cycle, the program's main thread is taken for its client where
    it is one of them, else the one least busy (a client mostly waits for its results);
    ``prog.split`` records each (and its ``assumed`` says so)."""
    order = sorted(stages, key=lambda s: (s.name != MAIN, prog.busy.get(s.name, 1.0)))
    for s in order:
        ins = [c for c in channels if s.name in takers(c)]
        if not ins or not any(s.name in putters(c) for c in channels):
            continue
        if not any(_reaches(channels, s.name, p) or p == s.name for c in ins for p in putters(c)):
            continue
        back = RESULTS.format(s.name)
        prog.split[s.name] = back
        made = prog.runner[s.name]["items_out"]
        i = [t.name for t in stages].index(s.name)
        stages[i] = replace(
            s,
            items=max(int(made), 1),
            ratio=1.0,
            service=np.zeros(1),
            cpu_share=0.0,
            overhead_ns=0.0,
        )
        stages.insert(i + 1, replace(s, name=back, items=0, ratio=0.0, workers=1))
        channels = [
            replace(c, dst=back if c.dst == s.name else c.dst,
                    more_dst=tuple(back if d == s.name else d for d in c.more_dst))
            for c in channels
        ]  # fmt: skip
        prog.assumed.append(
            f"{s.name} hands items on and takes the results back: modelled as a source of the "
            f"{made:,.0f} it handed on, as fast as its channels take them, and a sink of what "
            f"came back ({back}), whose items take its time; when it took them back is not "
            "modelled (what waited for it is not compared)"
        )
    return stages, channels


def program_states(
    run: Run, net: Network, prog: ProgramInputs
) -> tuple[dict[str, tuple[float, float, float]], float]:
    """Each stage's share of its working time busy, blocked in, blocked out (the ``worker``
    table, summed over its workers; none for a client the model split), and the items/s the
    program's sinks took while they ran (a program's sources may run far ahead of the rest
    into unbounded queues: what its last stages take is its rate)."""
    _, rows = run.sql("SELECT stage, sum(busy_ns), sum(blocked_in_ns), sum(blocked_out_ns), "
                      "count(*) FROM worker GROUP BY stage")  # fmt: skip
    work = {
        str(r[0]): (float(r[1] or 0), float(r[2] or 0), float(r[3] or 0), float(r[4] or 1))
        for r in rows
    }
    shares = {}
    sources = {s.name for s in net.stages if not any(s.name in takers(c) for c in net.channels)}
    for name, (b, i, o, _n) in work.items():
        if b + i + o <= 0 or name in prog.split:
            continue
        if name in sources and i / (b + i + o) >= WAITED:
            prog.assumed.append(
                f"{name} makes items and waited {i / (b + i + o):.0%} of its time for "
                "something the model lacks (results taken through calls): its busy share "
                "is not compared"
            )
            continue
        shares[name] = (b / (b + i + o), i / (b + i + o), o / (b + i + o))
    owner = {back: name for name, back in prog.split.items()}
    rate = 0.0
    for name in rate_stages(net, prog.items):
        b, i, o, n = work.get(owner.get(name, name), (0.0, 0.0, 0.0, 1.0))
        taken = sum(prog.items.get(c.name, 0.0) for c in net.channels if c.dst == name)
        if b + i + o > 0:
            rate += taken / ((b + i + o) / max(n, 1.0) / 1e9)
    if not rate > 0:
        raise WhatIfError(
            f"{run.path or 'the run'}: its last stages' states were not recorded, so how fast "
            "they took items is not known: run it again with a state(*) query (the default "
            "queries have one)"
        )
    return shares, rate


#: Fewer items than this taken over a run give a stage no rate to go by (a program's main
#: thread taking the one total its workers summed up): the stages putting into it measure the
#: program's rate instead.
RATE_ITEMS = 20


def rate_stages(net: Network, items: dict[str, float]) -> tuple[str, ...]:
    """The stages whose takes measure a program's rate (``items``: what each channel carried):
    its sinks (stages that take and put nothing), each that took fewer than ``RATE_ITEMS``
    replaced by the stages that put into it and take themselves (a reduction's result is one
    item; its inputs are the flow: measured at its one item, a second consumer of the inputs
    came out at 0 items/s)."""
    chosen: list[str] = []
    todo = [s.name for s in net.stages if _ins(net, s.name) and not _puts(net, s.name)]
    seen: set[str] = set()
    while todo:
        name = todo.pop(0)
        if name in seen:
            continue
        seen.add(name)
        ins = _ins(net, name)
        ups = [p for c in ins for p in putters(c) if _ins(net, p)]
        if sum(items.get(c.name, 0.0) for c in ins) < RATE_ITEMS and ups:
            todo += ups
        else:
            chosen.append(name)
    return tuple(chosen)


def _ins(net: Network, name: str) -> list[ChannelModel]:
    return [c for c in net.channels if c.dst == name]


def _puts(net: Network, name: str) -> bool:
    return any(name in putters(c) for c in net.channels)


def sinks_rate(net: Network, r: SimResult) -> float:
    """Items/s the stages that measure the program's rate (``Network.rate_at``: ``rate_stages``
    of the run; its sinks where not given) took while they ran (``program_states``' measure,
    in a simulation)."""
    at = net.rate_at or tuple(
        s.name for s in net.stages if _ins(net, s.name) and not _puts(net, s.name)
    )
    rate = 0.0
    for name in at:
        s = net.stage(name)
        st = r.states[name]
        work = st[BUSY] + st[BLOCKED_IN] + st[BLOCKED_OUT]
        taken = sum(len(r.take_times[c.name]) for c in _ins(net, name))
        rate += taken / (work / s.workers / 1e9) if work > 0 else 0.0
    return rate


__all__ = [
    "RESULTS",
    "SHARED_KINDS",
    "ProgramInputs",
    "channel_items",
    "program_inputs",
    "program_states",
    "rate_stages",
    "sinks_rate",
    "split_clients",
]
