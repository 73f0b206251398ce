"""Queue-model speed: customers per second through the vectorised models against SimPy.

In: one seeded M/M/1 input (inter-arrival and service times, ns) shared by ``lindley_fifo`` and
a SimPy model of the same queue; seeded inputs for ``tandem_bulk`` (bus + device server). Out:
whether both M/M/1 peers give the same departures, a table of customers/s and the ratios.

    python benchmarks/bench_sim.py [--quick] [--reps N]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import simpy
from numpy.typing import NDArray

from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.model import blocking_fifo, lindley_fifo, tandem_bulk

F64 = NDArray[np.float64]
TARGET_VS_SIMPY = 100.0
TARGET_BULK_PER_S = 2e6


def simpy_mm1(gaps: F64, service: F64) -> F64:
    """Departure times of the single-server FIFO queue, by SimPy's event kernel."""
    env = simpy.Environment()
    server = simpy.Resource(env, capacity=1)
    depart = np.empty(gaps.size)
    g, s = gaps.tolist(), service.tolist()

    def customer(k: int) -> simpy.events.ProcessGenerator:
        with server.request() as req:
            yield req
            yield env.timeout(s[k])
            depart[k] = env.now

    def source() -> simpy.events.ProcessGenerator:
        for k in range(len(g)):
            yield env.timeout(g[k])
            env.process(customer(k))

    env.process(source())
    env.run()
    return depart


def rate(fn: Callable[[], object], n: int) -> Callable[[], tuple[float]]:
    def measure() -> tuple[float]:
        t = time.perf_counter()
        fn()
        return (n / (time.perf_counter() - t),)

    return measure


def main() -> None:
    args = parse_args(__doc__ or "")
    reps = args.reps or (3 if args.quick else 5)
    n_simpy = 20_000 if args.quick else 200_000
    n_fast = 1_000_000 if args.quick else 4_000_000
    rng = np.random.default_rng(2024)

    gaps = rng.exponential(1000.0, n_simpy)
    service = rng.exponential(800.0, n_simpy)
    ours = lindley_fifo(np.cumsum(gaps), service)
    peer = simpy_mm1(gaps, service)
    err = float(np.max(np.abs(ours - peer)))
    scale = float(peer.max())
    same = err <= 1e-12 * scale * math.sqrt(n_simpy) + 1e-9
    print(f"M/M/1 departures, n={n_simpy}: max |lindley - simpy| = {err:.3g} ns")
    print(f"  (relative to the horizon {err / scale:.2g}) -> {'same' if same else 'DIFFERENT'}")

    big_a = np.cumsum(rng.exponential(1000.0, n_fast))
    big_s = rng.exponential(800.0, n_fast)
    tr = np.full(n_fast, 3200.0)
    s2 = rng.exponential(800.0, n_fast)
    variants: list[tuple[str, Callable[[], tuple[float]]]] = [
        ("simpy M/M/1", rate(lambda: simpy_mm1(gaps, service), n_simpy)),
        ("lindley_fifo M/M/1", rate(lambda: lindley_fifo(big_a, big_s), n_fast)),
        (
            "blocking_fifo C=4 (loop)",
            rate(lambda: blocking_fifo(gaps, service, 4), n_simpy),
        ),
        (
            "tandem_bulk b=4 (vectorised)",
            rate(lambda: tandem_bulk(big_a, 4, tr, math.inf, s2), n_fast),
        ),
        (
            "tandem_bulk b=4 C2=8 timeout (loop)",
            rate(lambda: tandem_bulk(big_a[:n_simpy], 4, 3200.0, 5000.0, s2[:n_simpy], 8), n_simpy),
        ),
    ]
    (summaries,) = interleave(variants, reps)
    by = {s.name: s for s in summaries}
    rows = [[s.name, f"{s.median:,.0f}", fmt_spread(s)] for s in summaries]
    print(machine())
    print(table(["variant", "customers/s", "spread"], rows))
    simpy_s = by["simpy M/M/1"]
    ratios: list[Summary] = [
        paired_ratios(by["lindley_fifo M/M/1"], simpy_s),
        paired_ratios(by["blocking_fifo C=4 (loop)"], simpy_s),
    ]
    for r in ratios:
        print(f"{r.name}: {r.median:,.0f}x (target >= {TARGET_VS_SIMPY:.0f}x for lindley)")
    for name in ("tandem_bulk b=4 (vectorised)", "tandem_bulk b=4 C2=8 timeout (loop)"):
        m = by[name].median
        verdict = "meets" if m >= TARGET_BULK_PER_S else "MISSES"
        print(f"{name}: {m / 1e6:.2f} M customers/s, {verdict} the 2 M/s target")


if __name__ == "__main__":
    main()
