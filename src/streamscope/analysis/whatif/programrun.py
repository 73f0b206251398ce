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

from dataclasses import dataclass, field

import numpy as np

from streamscope.analysis.series import collect
from streamscope.analysis.whatif.kinds import WhatIfError
from streamscope.analysis.whatif.terms import worker_kind
from streamscope.store.reader import Run

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


def program_inputs(run: Run) -> ProgramInputs:
    """The model's inputs from a program's run; ``WhatIfError`` naming what it lacks."""
    topo = run.topology
    where = run.path or "the run"
    cols = run.columns("SELECT stage, wall_ns, cpu_ns FROM service ORDER BY stage")
    pairs: dict[str, list[tuple[int, int | None]]] = {}
    for s, w, c in zip(cols.get("stage", []), cols.get("wall_ns", []), cols.get("cpu_ns", []),
                       strict=True):  # fmt: skip
        pairs.setdefault(str(s), []).append((int(w), None if c is None else int(c)))
    lacking = [s.name for s in topo.stages if not pairs.get(s.name)]
    if lacking:
        raise WhatIfError(
            f"{where} has no service times for {', '.join(lacking)}: the what-if model needs "
            "each stage's, which its workers' state probes time (a state(*) query watching "
            "them; the default queries have one); a stage that took no item has none"
        )
    items = channel_items(run)
    unseen = [c.name for c in topo.channels if c.name not in items]
    if unseen:
        raise WhatIfError(
            f"{where}: how many items went through {', '.join(unseen)} was not recorded: run "
            "it again with a throughput(* -> *) query (the default queries have one)"
        )
    kinds = {r.name: r.kind for r in topo.resources}
    _, wrows = run.sql("SELECT stage, resource FROM worker")
    out = ProgramInputs()
    resources: dict[str, list[str]] = {}
    for stage, res in wrows:
        resources.setdefault(str(stage), []).append(str(res))
    for st in topo.stages:
        ins = [c for c in topo.channels if c.dst == st.name]
        outs = [c for c in topo.channels if c.src == st.name]
        made = sum(items[c.name] for c in outs)
        if st.fanout == "broadcast" and outs:
            made /= len(outs)
        took = sum(items[c.name] for c in ins) if ins else made
        mine = pairs[st.name]
        timed = [(w, c) for w, c in mine if c is not None]
        out.samples[st.name] = [w for w, _ in mine]
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
        out.runner[st.name] = {
            "items": took, "samples": float(len(timed)), "user_ns": user, "cpu_ns": cpu_item * took,
            "items_out": made, "user_wall_ns": user_wall, "runq_ns": 0.0, "switch_ns": 0.0,
        }  # fmt: skip
    for c in topo.channels:
        if c.capacity >= 1:
            out.capacity[c.name] = c.capacity
            continue
        top = max(int(items[c.name]) + 1, 1)
        out.capacity[c.name] = top
        out.assumed.append(f"{c.name} has no bound: modelled as holding all {top - 1:,} items "
                           "that went through it")  # fmt: skip
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


__all__ = ["SHARED_KINDS", "ProgramInputs", "channel_items", "program_inputs"]
