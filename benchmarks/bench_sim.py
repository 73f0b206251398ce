"""Queue-model speed: customers per second through the vectorised models against SimPy.

In: one seeded M/M/1 input (inter-arrival and service times, ns) shared by ``lindley_fifo`` and
a SimPy model of the same queue; one seeded two-station tandem with a buffer of 4 places and
blocking after service (arrivals at rho 0.8 of station 1, station 2 at 0.9), shared by
``tandem_blocking`` (its per-customer loop compiled where it was built), SimPy's model of
it, Ciw's, and the what-if pipeline simulator (``model.network``: its compiled event loop and
its Python loop), all checked to give SimPy's departures; seeded inputs for ``tandem_bulk`` (bus + device server; the
paper's bus: bulk 16, exponential arrivals, device server at rho = 0.8, a finite inactivity
timeout, the device buffer unbounded, of 64 places, or of 16 places with a 2 us latency). Out:
whether both M/M/1 peers give the same departures, whether ``tandem_bulk`` matches the reference
event loop, a table of customers/s and the ratios (to SimPy; to the reference event loop).

    python benchmarks/bench_sim.py [--quick] [--reps N]
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import ciw
import numpy as np
import simpy
from numpy.typing import NDArray

from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.model import blocking_fifo, lindley_fifo, tandem_blocking, tandem_bulk
from streamscope.model.bulk_reference import event_loop_reference as _event_loop_reference
from streamscope.model.network import COMPILED as NETWORK_COMPILED
from streamscope.model.network import ChannelModel, Network, StageModel, simulate
from streamscope.model.recursions import COMPILED
from streamscope.model.recursions import lindley as _lindley

F64 = NDArray[np.float64]
TARGET_VS_SIMPY = 100.0
TARGET_BULK_PER_S = 2e6
BULK = "tandem_bulk b=16 timeout"
BULK_C2 = "tandem_bulk b=16 timeout C2=64"
BULK_LAT = "tandem_bulk b=16 timeout C2=16 latency"
REFERENCE = "reference event loop b=16 timeout"
REFERENCE_C2 = "reference event loop b=16 timeout C2=64"


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


def simpy_tandem(arrive: F64, s1: F64, s2: F64, cap: int) -> F64:
    """Station-2 departures of two FIFO stations with a buffer of ``cap`` places between them
    and blocking after service (station 1 holds a finished customer until the buffer has room),
    by SimPy's event kernel."""
    env = simpy.Environment()
    station1 = simpy.Resource(env, capacity=1)
    buffer = simpy.Store(env, capacity=cap)
    n = arrive.size
    depart = np.empty(n)
    a, x1, x2 = arrive.tolist(), s1.tolist(), s2.tolist()

    def customer(k: int) -> simpy.events.ProcessGenerator:
        with station1.request() as req:
            yield req
            yield env.timeout(x1[k])
            yield buffer.put(k)  # held at station 1 while the buffer is full

    def station2() -> simpy.events.ProcessGenerator:
        for _ in range(n):
            k = yield buffer.get()
            yield env.timeout(x2[k])
            depart[k] = env.now

    def source() -> simpy.events.ProcessGenerator:
        t = 0.0
        for k in range(n):
            yield env.timeout(a[k] - t)
            t = a[k]
            env.process(customer(k))

    env.process(source())
    env.process(station2())
    env.run()
    return depart


def ciw_tandem(arrive: F64, s1: F64, s2: F64, cap: int) -> F64:
    """The same tandem by Ciw (its blocking after service, a queue of ``cap`` places at
    station 2), fed the same times in order: station-2 departures by customer."""
    gaps = np.diff(arrive, prepend=0.0).tolist()
    net = ciw.create_network(
        arrival_distributions=[ciw.dists.Sequential([*gaps, math.inf]), None],
        service_distributions=[
            ciw.dists.Sequential(s1.tolist()),
            ciw.dists.Sequential(s2.tolist()),
        ],
        routing=[[0.0, 1.0], [0.0, 0.0]],
        number_of_servers=[1, 1],
        queue_capacities=[math.inf, cap],
    )
    sim = ciw.Simulation(net)
    sim.simulate_until_max_customers(arrive.size, method="Finish")
    out = sorted((r.id_number, r.exit_date) for r in sim.get_all_records() if r.node == 2)
    return np.array([t for _, t in out])


def network_tandem(arrive: F64, s1: F64, s2: F64, cap: int, compiled: bool | None = None) -> F64:
    """The same tandem as a pipeline of ``model.network`` (the what-if simulator, one event at a
    time; ``compiled``: its compiled loop where built, False: its Python loop): a source making
    the arrivals into an unbounded channel, two stages, ``cap`` places between them; station-2
    departures by customer."""
    n = arrive.size
    gaps = np.diff(arrive, prepend=0.0)
    net = Network(
        (StageModel("arrivals", gaps, items=n, in_order=True, interpreter="a"),
         StageModel("s1", s1, in_order=True, interpreter="b"),
         StageModel("s2", s2, in_order=True, ratio=0.0, interpreter="c")),
        (ChannelModel("q1", "arrivals", "s1", n), ChannelModel("q2", "s1", "s2", cap)),
        cores=3,
    )  # fmt: skip
    r = simulate(net, compiled=compiled)
    return r.take_times["q2"] + s2


def rate(fn: Callable[[], object], n: int) -> Callable[[], tuple[float]]:
    def measure() -> tuple[float]:
        t = time.perf_counter()
        fn()
        return (n / (time.perf_counter() - t),)

    return measure


def bus_inputs(rng: np.random.Generator, n: int) -> tuple[F64, F64]:
    """Exponential arrivals (mean gap 1000 ns) and device service times at rho = 0.8."""
    return np.cumsum(rng.exponential(1000.0, n)), rng.exponential(800.0, n)


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

    t_a = np.cumsum(rng.exponential(1000.0, n_simpy))
    t_s1, t_s2 = rng.exponential(800.0, n_simpy), rng.exponential(900.0, n_simpy)
    theirs = simpy_tandem(t_a, t_s1, t_s2, 4)
    print(f"tandem with blocking C=4, n={n_simpy}, against SimPy's model of it:")
    for name, peer_fn in (
        ("tandem_blocking", lambda a, x, y, c: tandem_blocking(a, x, y, c).depart),
        ("Ciw", ciw_tandem),
        ("model.network", network_tandem),
        ("model.network (Python loop)", lambda a, x, y, c: network_tandem(a, x, y, c, False)),
    ):
        other = peer_fn(t_a, t_s1, t_s2, 4)
        err = float(np.max(np.abs(other - theirs)))
        same = err <= 1e-12 * float(theirs.max()) * math.sqrt(n_simpy) + 1e-9
        print(f"  max |{name} - simpy| = {err:.3g} ns -> {'same' if same else 'DIFFERENT'}")
        if not same:
            raise SystemExit(f"{name} differs from SimPy's model of the same tandem")

    big_a, big_s = bus_inputs(rng, n_fast)
    tr = np.full(n_fast, 3200.0)
    s2 = rng.exponential(800.0, n_fast)
    # The paper's bus: bulk 16, 6 us per transfer (bus load ~0.4), 5 us inactivity flush.
    bus_a, bus_s2 = bus_inputs(rng, n_fast)
    bus = {"bulk_size": 16, "transfer_ns": 6000.0, "timeout_ns": 5000.0}
    small_a, small_s2 = bus_a[:n_simpy], bus_s2[:n_simpy]
    small_tr, end = np.full(n_simpy, 6000.0), float(small_a[-1])

    def reference(cap2: int | None) -> tuple[F64, ...]:
        """The item-by-item event loop the per-transfer loop replaced, on the first n_simpy."""
        s2_ref = None if cap2 is None else small_s2
        out = _event_loop_reference(small_a, 16, 16, small_tr, 0.0, 5000.0, end, s2_ref, cap2 or 0)
        return out if cap2 is not None else (*out[:3], _lindley(out[2], small_s2))

    for cap2 in (None, 64):
        got = tandem_bulk(small_a, s2=small_s2, capacity2=cap2, **bus)
        mine = (got.start1, got.done1, got.deliver, got.depart)
        if not all(np.array_equal(x, y) for x, y in zip(mine, reference(cap2), strict=True)):
            raise SystemExit(f"tandem_bulk C2={cap2} differs from the reference event loop")
    print(f"tandem_bulk b=16 timeout, n={n_simpy}, C2=inf and 64: identical to the reference loop")

    variants: list[tuple[str, Callable[[], tuple[float]]]] = [
        ("simpy M/M/1", rate(lambda: simpy_mm1(gaps, service), n_simpy)),
        ("lindley_fifo M/M/1", rate(lambda: lindley_fifo(big_a, big_s), n_fast)),
        ("blocking_fifo C=4 (loop)", rate(lambda: blocking_fifo(gaps, service, 4), n_simpy)),
        ("simpy tandem C=4", rate(lambda: simpy_tandem(t_a, t_s1, t_s2, 4), n_simpy)),
        ("tandem_blocking C=4", rate(lambda: tandem_blocking(t_a, t_s1, t_s2, 4), n_simpy)),
        ("ciw tandem C=4", rate(lambda: ciw_tandem(t_a, t_s1, t_s2, 4), n_simpy)),
        ("model.network tandem C=4", rate(lambda: network_tandem(t_a, t_s1, t_s2, 4), n_simpy)),
        (
            "model.network tandem C=4 (Python loop)",
            rate(lambda: network_tandem(t_a, t_s1, t_s2, 4, False), n_simpy),
        ),
        (
            "tandem_bulk b=4 no timeout",
            rate(lambda: tandem_bulk(big_a, 4, tr, math.inf, s2), n_fast),
        ),
        (BULK, rate(lambda: tandem_bulk(bus_a, s2=bus_s2, **bus), n_fast)),
        (BULK_C2, rate(lambda: tandem_bulk(bus_a, s2=bus_s2, capacity2=64, **bus), n_fast)),
        (
            BULK_LAT,
            rate(
                lambda: tandem_bulk(bus_a, s2=bus_s2, capacity2=16, latency_ns=2000.0, **bus),
                n_fast,
            ),
        ),
        (REFERENCE, rate(lambda: reference(None), n_simpy)),
        (REFERENCE_C2, rate(lambda: reference(64), n_simpy)),
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

    def against_simpy(name: str, what: str) -> None:
        """``name``'s ratio to SimPy's model of the same tandem, against the target; and to Ciw's."""
        r = paired_ratios(by[name], by["simpy tandem C=4"])
        verdict = "meets" if r.median >= TARGET_VS_SIMPY else "MISSES"
        print(f"{r.name}: {r.median:,.1f}x ({what}: {verdict} the target >= "
              f"{TARGET_VS_SIMPY:.0f}x on the same tandem with blocking)")  # fmt: skip
        r = paired_ratios(by[name], by["ciw tandem C=4"])
        print(f"{r.name}: {r.median:,.0f}x")

    against_simpy(
        "tandem_blocking C=4",
        "compiled loop" if COMPILED else "Python loop: the kernels were not built",
    )
    against_simpy(
        "model.network tandem C=4",
        "the what-if pipeline simulator, "
        + ("compiled event loop" if NETWORK_COMPILED else "Python loop: it was not built"),
    )
    r = paired_ratios(by["model.network tandem C=4 (Python loop)"], by["simpy tandem C=4"])
    print(f"{r.name}: {r.median:,.2f}x (its Python loop, the reference it is held to)")
    for name, old in ((BULK, REFERENCE), (BULK_C2, REFERENCE_C2)):
        r = paired_ratios(by[name], by[old])
        print(f"{r.name}: {r.median:.1f}x")
    for name in ("tandem_bulk b=4 no timeout", BULK, BULK_C2, BULK_LAT):
        m = by[name].median
        verdict = "meets" if m >= TARGET_BULK_PER_S else "MISSES"
        print(f"{name}: {m / 1e6:.2f} M customers/s, {verdict} the 2 M/s target")


if __name__ == "__main__":
    main()
