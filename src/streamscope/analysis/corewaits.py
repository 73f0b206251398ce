"""A stage's waits for a core, taken out of its service samples where the what-if simulation
makes them again.

In: a stage's service samples (wall ns of its own code per item), the CPU share of that code and
the thread's run-queue time per CPU ns. Out: the samples and share the model simulates.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: Code whose own CPU time is at least this share of its wall time waits for a core while it
#: computes (preempted); below it, mostly when it is woken (its sleep or I/O done).
COMPUTES = 0.5


def unqueued(
    pool: NDArray[np.float64], share: float, queued: float
) -> tuple[NDArray[np.float64], float]:
    """A stage's service samples and CPU share with its waits for a core (``queued``: the run
    queue's ns per CPU ns of the thread) taken out where they are spread over its computing:
    the simulation shares the cores itself, with what else ran. Code that mostly sleeps waits
    for a core when it is woken, some hundreds of microseconds an item beside a busy core,
    which the simulation, sharing the cores by CPU time, would not make again (taken out,
    a tandem of two 4 ms sleepers was modelled 12 % faster than it ran): its samples stay."""
    if queued <= 0 or share < COMPUTES:
        return pool, share
    kept = max(1.0 - queued * share, share)
    return pool * kept, share / kept
