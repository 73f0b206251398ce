"""A stage's waits for a core, taken out of its service samples where the what-if simulation
makes them again, and put back where the simulation makes fewer than the run had.

In: a stage's service samples (wall ns of its own code per item), the CPU share of that code and
the thread's run-queue time per CPU ns. Out: the samples and share the model simulates
(``unqueued``), and the model's stages busy all along slowed by the waits it lacks
(``core_waits``).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from streamscope.model.network import Network, StageModel, simulate

#: Code whose own wall time is at least this share on a core or waiting for one (its CPU time
#: and its run queue's) waits for a core while it computes (preempted); below it, mostly when
#: it is woken (its sleep or I/O done). (Its CPU time alone is no measure: beside two CPU hogs
#: and more, a pure-Python stage was on a core 47 % of its wall time and waited for one the
#: rest; taken for a sleeper, its lock was said free half the time, a second thread +44 %.)
COMPUTES = 0.5
#: A stage whose own code is CPU time for this share of its wall time or more computes all
#: along: the rest is taken for waiting for its lock, not for sleep or I/O (its waits for a core,
#: the run queue's, are taken out first).
CPU_BOUND = 0.9
#: A stage thread busy all along whose wait for a core (per ns of its CPU time) is more than this
#: from what the model's equal sharing of the cores makes it wait has its CPU time stretched
#: (or shrunk) until, with the model's waits, it takes as long as it did (``core_waits``).
RUNQ_MARGIN = 0.03
#: Simulations of the stretched model that bring its waits to the run's (a fixed point: a
#: slower stage makes fewer items a second, so the monitor, whose load follows the rate, and
#: its neighbours take its core less often; one stretch left a pure-Python stage beside a
#: CPU hog 3.5 % short of the time it took).
PASSES = 3


def waits_taken(share: float, queued: float) -> bool:
    """Whether ``unqueued`` takes a stage's waits for a core out of its samples: code whose
    wall time is ``COMPUTES`` or more on a core or waiting for one."""
    return queued > 0 and share * (1 + queued) >= COMPUTES


def unqueued(
    pool: NDArray[np.float64], share: float, queued: float
) -> tuple[NDArray[np.float64], float]:
    """A stage's service samples and CPU share with its waits for a core (``queued``: the run
    queue's ns per CPU ns of the thread) taken out where they are spread over its computing:
    the simulation shares the cores itself, with what else ran. Code that mostly sleeps waits
    for a core when it is woken, some hundreds of microseconds an item beside a busy core,
    which the simulation, sharing the cores by CPU time, would not make again (taken out,
    a tandem of two 4 ms sleepers was modelled 12 % faster than it ran): its samples stay."""
    if not waits_taken(share, queued):
        return pool, share
    kept = max(1.0 - queued * share, share)
    return pool * kept, share / kept


def service_samples(
    pool: NDArray[np.float64], share: float, queued: float, own_cpu: float, *, one_core: bool
) -> tuple[NDArray[np.float64], float]:
    """The samples and CPU share a stage is simulated with: its waits for a core taken out
    (``unqueued``), and where its code then computes all along (``CPU_BOUND``), the samples made
    its own code's CPU time per item, ``own_cpu``, all of them: the wall time beyond it was
    spent waiting for the lock or a core, which the simulation makes of its own, and as a sleep
    it would free the lock each item, which such code never does (preemptions fall on few
    items, which the items whose CPU time was read may have missed, and taking the run queue's
    share out of all samples by those items' share left a pure-Python stage's 6 % short of its
    CPU time once, its model as much faster than the run). Code on several cores at once
    (``one_core`` false: CPU time beyond its wall time) is only ever brought down to it."""
    pool, share = unqueued(pool, share, queued)
    if share < CPU_BOUND:
        return pool, share
    mean = float(pool.mean())
    k = own_cpu / mean if mean > 0 else 1.0
    return pool * (k if one_core else min(k, 1.0)), 1.0


def core_waits(
    net: Network, runner: dict[str, dict[str, float]],
    shares: dict[str, tuple[float, float, float]], taken: frozenset[str] = frozenset(),
) -> tuple[Network, dict[str, tuple[float, float, bool]]]:  # fmt: skip
    """Each stage thread's measured wait for a core (the run queue's, per ns of its CPU time)
    against the model's: where it waited more than ``RUNQ_MARGIN`` beyond (what else ran took
    its core first: the OS wakes a thread on the core of the one that woke it, and the monitor
    and the stages' neighbours wake often), the model is made to lose what the run lost; where
    it waited that much less (what else ran kept to the other cores: the model's background
    load, jobs at random, overlaps itself, where one other busy thread never does; so modelled,
    a pure-Python stage beside one on two CPUs was 15 % slower than it ran), to lose only that. Only
    for a thread busy all along (``shares``: ``CPU_BOUND`` or more) whose code computes (a
    bottleneck that sleeps is busy all along too): it waits when it is preempted, holding its
    lock, and its CPU time is stretched by ``k`` so that with the model's waits it takes as
    long as it did with the run's, ``k (1 + sim(k)) = 1 + measured``, found in ``PASSES``
    simulations (``k`` < 1 where it waited less). A thread that sleeps between items waits
    mostly when woken, for a few microseconds before it takes its lock, which the model leaves
    out: it is stretched never, but shrunk where the model makes it wait more than it did
    (beside a CPU hog on two CPUs, a stage computing 3 ms and sleeping 10 ms an item waited 9 %
    of its CPU time, the model's other load at random made it 32 %, its rate 8 % under the
    run's; only its computing is shrunk).

    Which waits the samples hold decides what the model's are to add up to. A stage busy all
    along whose waits ``unqueued`` took out of its samples (``taken``: its code computes)
    gets them back as a stage that computes all along does, whatever its CPU share (a stage
    computing 3 ms and sleeping 10 ms an item beside a hog and a load on and off waited 2.5 ns
    for a core per ns of CPU; taken out and not put back, its model ran 27 % fast). One whose
    samples hold its waits (it sleeps) has the model's waits on top of them: it is shrunk
    until they add nothing (so left on top, the same stage's model ran 10-13 % slow). Out: the
    network, and for each stage stretched or shrunk, its measured wait, the unchanged model's,
    and whether its samples held its waits."""
    measured: dict[str, float] = {}
    out: dict[str, tuple[float, float, bool]] = {}
    slowed = net
    for n in range(PASSES):
        runs = [simulate(slowed, seed=2000 + i, resample=True) for i in range(2)]
        stretch: dict[str, float] = {}
        for s in slowed.stages:
            r = runner.get(s.name)
            cpu = sum(x.cpu[s.name] for x in runs)
            along = shares.get(s.name, (0.0,))[0] >= CPU_BOUND
            busy = along and (s.cpu_share >= CPU_BOUND or s.name in taken)
            held = along and not busy  # busy all along, its samples holding its waits
            if (n and s.name not in measured) or r is None or r["cpu_ns"] <= 0 or cpu <= 0:
                continue
            meas = r["runq_ns"] / r["cpu_ns"]
            sim = sum(x.runq[s.name] for x in runs) / cpu
            want = 0.0 if held else meas  # the waits the model is to add
            if not n and (abs(want - sim) <= RUNQ_MARGIN or (not busy and sim <= want)):
                continue
            if not n:
                measured[s.name], out[s.name] = want, (meas, sim, held)
            # CPU time x k, the model's waits: the run's
            stretch[s.name] = (1 + measured[s.name]) / (1 + sim)
        if not stretch:
            break
        slowed = replace(net, stages=tuple(
            _stretched(s, stretch[s.name]) if s.name in stretch else s for s in net.stages
        ))  # fmt: skip
    return slowed, out


def _stretched(s: StageModel, k: float) -> StageModel:
    grow = 1.0 + (k - 1) * s.cpu_share
    return replace(s, service=s.service * grow, cpu_share=s.cpu_share * k / grow,
                   overhead_ns=s.overhead_ns * k)  # fmt: skip
