"""A small channel with a blocking producer is exactly M/M/1/(C+2).

The system is the channel (capacity C) plus the item in service plus the item a blocked producer
holds; the producer's exponential clock restarts when a blocked insertion completes
(examples/mm1.py; a block shorter than 0.2 ms keeps the old deadline, a small bias), so arrivals
are Poisson whenever the system is below K = C + 2. The channel holds no item in states 0 and 1,
n - 1 items in state n (n = 2..C+1), and C in state C+2.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy.optimize import brentq

from oracles import example, held_bounds, occupancy_ns, w1
from streamscope.runtime import RunOptions, run
from streamscope.store.reader import Run
from streamscope.store.writer import InMemoryStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EDGE = "source -> server"
FRAME_NS = 500_000_000
TOLERANCE = 0.10

F64 = NDArray[np.float64]


def mm1k(rho: float, k: int) -> F64:
    """Stationary distribution of M/M/1/K: p_n proportional to rho^n, n = 0..K."""
    p = rho ** np.arange(k + 1, dtype=np.float64)
    return p / p.sum()


def channel_distribution(rho: float, capacity: int) -> F64:
    """Occupancy of the channel, levels 0..C, from M/M/1/(C+2)."""
    p = mm1k(rho, capacity + 2)
    c = np.empty(capacity + 1)
    c[0] = p[0] + p[1]
    c[1:capacity] = p[2 : capacity + 1]
    c[capacity] = p[capacity + 1] + p[capacity + 2]
    return c


def fit_rho(utilisation: float, capacity: int) -> float:
    """The rho whose M/M/1/(C+2) keeps the server busy ``utilisation`` of the time (1 - p0)."""
    return float(brentq(lambda r: 1 - mm1k(r, capacity + 2)[0] - utilisation, 1e-6, 1e3))


# (C, nominal rho, items). Small K relaxes within a few service times: simulating the chain with
# the same estimator (rho fitted to the realised utilisation), the relative error of the mean has
# sd 0.018 (C=2, rho 0.8) and 0.021 (C=4, rho 1.0) at 4000 items, so 10 % is about 5 sd: chance
# fails the theory check about once in a million runs; and since the run's own record is held
# to the formula first (within half of it), what fails it is the monitor, not the realisation.
CASES = [(2, 0.8, 4000), (4, 1.0, 4000)]


@pytest.mark.slow
@pytest.mark.parametrize(("capacity", "rho", "items"), CASES, ids=["C2-rho0.8", "C4-rho1.0"])
def test_blocking_channel_is_mm1k(tmp_path: Path, capacity: int, rho: float, items: int) -> None:
    truth = tmp_path / "truth"
    argv = [
        "--rho", str(rho),
        "--items", str(items),
        "--capacity", str(capacity),
        "--seed", "21",
        "--service-ms", "1",
        "--source-resource", "process",
        "--server-resource", "process",
        "--truth", str(truth),
    ]  # fmt: skip
    res = run(
        example("mm1").build(argv),
        [f"occupancy({EDGE}): mean, histogram every 500ms"],
        RunOptions(frame_ns=FRAME_NS, mode="inline"),
    )
    assert res.status == "completed", res.error
    assert isinstance(res.store, InMemoryStore)
    ns = occupancy_ns(Run.from_memory(res.store), 0, EDGE, capacity)[0]

    inserted = np.load(truth / "inserted.npy")
    removed = np.load(truth / "removed.npy")
    served = np.load(truth / "served.npy").astype(np.float64)
    n = len(inserted)
    span = float(removed[-1] - inserted[0])
    # Effective service: the sleep plus the server's per-item overhead outside process(), seen
    # whenever the next item was already waiting when process() returned.
    done = removed[:-1] + served[:-1]
    waiting = inserted[1:] < done
    overhead = float((removed[1:] - done)[waiting].mean())
    s_mean = float(served.mean()) + overhead
    # Realised rates: mu = 1 / E[S]. The producer's own rate is not observable from insertion
    # times (its clock stops while it is blocked), so lambda is fixed by flow balance: the
    # realised throughput X keeps the server busy X * E[S] of the time, and in M/M/1/K that is
    # 1 - p0(rho). The mean and shape of the channel's distribution are then what is checked.
    utilisation = n / span * s_mean
    assert 0 < utilisation < 1, f"utilisation {utilisation}"
    rho_r = fit_rho(utilisation, capacity)
    theory = channel_distribution(rho_r, capacity)
    # The same window as in test_mm1_theory: the truth's [first insertion, last removal].
    p_mon = ns / span
    p_mon[0] += 1 - p_mon.sum()
    levels = np.arange(capacity + 1)
    mean_mon, mean_theory = float(levels @ p_mon), float(levels @ theory)
    mean_truth = float((removed - inserted).sum()) / span
    nominal = float(levels @ channel_distribution(rho, capacity))
    blocked = float(p_mon[capacity])
    figures = (
        f"C={capacity} rho {rho}: {n} items; monitored mean={mean_mon:.4f}, M/M/1/{capacity + 2} "
        f"at realised rates mean={mean_theory:.4f} (ratio {mean_mon / mean_theory:.4f}), truth "
        f"replay mean={mean_truth:.4f}, nominal rho mean={nominal:.4f}; W1={w1(p_mon, theory):.4f} "
        f"items; P(channel full) monitored={blocked:.4f} theory={theory[capacity]:.4f}; realised "
        f"rho={rho_r:.4f} utilisation={utilisation:.4f} E[S]={s_mean / 1e3:.1f}us "
        f"(overhead {overhead / 1e3:.1f}us); monitored distribution {np.round(p_mon, 4).tolist()} "
        f"theory {np.round(theory, 4).tolist()}"
    )
    print(figures)
    # The monitor against the application's own record of this run, whatever the machine did:
    # the time items spent in the channel, between the least and the most its stamps allow.
    least, most = held_bounds(truth, capacity)
    area = float(levels @ ns)
    print(f"held {area / 1e9:.4f} item-s, its stamps allow [{least / 1e9:.4f}, {most / 1e9:.4f}]")
    assert least * (1 - 1e-9) <= area <= most * (1 + 1e-9), (least, area, most, figures)
    # Theory, where the run realised the queue: a busy machine stalls the processes' sleeps in
    # bursts (then the replay itself is far from M/M/1/K, 14 % once under load, and it is the
    # run, not the monitor, that theory does not describe).
    if abs(mean_truth / mean_theory - 1) > TOLERANCE / 2:
        print("not an M/M/1/K run: the monitor is held to the run's own record alone")
        return
    assert mean_mon == pytest.approx(mean_theory, rel=TOLERANCE), figures
