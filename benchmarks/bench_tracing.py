"""Slowdown of a workload by function tracing, against viztracer and cProfile (Castells-Rufas et al. 2012 Fig. 17).

In: nothing (a leaf function that spins k iterations of integer arithmetic, called in a loop).
Out: per k, the bare call rate, the traced events per second (one ENTER and one EXIT per call)
and the slowdown (CPU time of the calling thread, traced / bare) under streamscope's
``FunctionTracer`` (bound thread, every leaf call traced), viztracer and cProfile, each
recording every call; then the cost of one call for each, and of a drain per event.

    python benchmarks/bench_tracing.py [--quick] [--reps N]
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import threading
import time
from collections.abc import Callable

from viztracer import VizTracer

from _harness import Summary, interleave, machine, paired_ratios, parse_args, table
from streamscope.core.records import Kind
from streamscope.probes.tracing import FunctionTracer

Fn = Callable[[int], int]


def leaf(k: int) -> int:
    """The traced function: pure bytecode, no C calls, so every tool sees one call and one
    return per call and nothing else."""
    i = 0
    while i < k:
        i += 1
    return i


def drive(fn: Fn, n: int, k: int) -> None:
    """The untraced driver: one function, whose loop makes no calls but ``fn``."""
    for _ in range(n):
        fn(k)


def cpu_per_call(fn: Fn, n: int, k: int) -> float:
    t0 = time.thread_time_ns()
    drive(fn, n, k)
    return (time.thread_time_ns() - t0) / n


drain_ns: list[float] = []


def streamscope(n: int, k: int, *, bind: bool = True, enabled: bool = True) -> float:
    tracer = FunctionTracer(capacity=2 * n + 64)
    fn = tracer.instrument(leaf)
    tracer.enabled = enabled
    tap = tracer.bind("bench", 1) if bind else None
    per_call = cpu_per_call(fn, n, k)
    tracer.unbind()
    if tap is not None:
        t0 = time.thread_time_ns()
        rec, dropped = tap.drain()
        drain_ns.append((time.thread_time_ns() - t0) / max(len(rec), 1))
        want = 2 * n if enabled else 0
        if len(rec) != want or dropped or (rec["kind"] == int(Kind.ENTER)).sum() != want // 2:
            raise RuntimeError(f"streamscope recorded {len(rec)} + {dropped} events, not {want}")
    return per_call


def viztracer(n: int, k: int) -> float:
    # One entry per call (a complete "X" event); room for all of them and then some, so the
    # ring never wraps. ``check_peers`` confirms on a short run that every call is recorded.
    tracer = VizTracer(
        tracer_entries=n + 1000, ignore_c_function=True, verbose=0, register_global=False
    )
    tracer.start()
    per_call = cpu_per_call(leaf, n, k)
    tracer.stop()
    tracer.clear()
    return per_call


def cprofile(n: int, k: int) -> float:
    prof = cProfile.Profile()
    prof.enable()
    per_call = cpu_per_call(leaf, n, k)
    prof.disable()
    return per_call


def check_peers(k: int, n: int = 500) -> None:
    """Every tool records every call of ``leaf`` (streamscope checks itself on every run)."""
    tracer = VizTracer(
        tracer_entries=n + 1000, ignore_c_function=True, verbose=0, register_global=False
    )
    tracer.start()
    drive(leaf, n, k)
    tracer.stop()
    got = sum(1 for e in tracer.load() if e.get("name", "").startswith("leaf"))
    if got != n:
        raise RuntimeError(f"viztracer recorded {got} calls of leaf, not {n}")
    prof = cProfile.Profile()
    prof.enable()
    drive(leaf, n, k)
    prof.disable()
    stats = pstats.Stats(prof).stats  # type: ignore[attr-defined]
    calls = sum(v[1] for key, v in stats.items() if key[2] == "leaf")
    if calls != n:
        raise RuntimeError(f"cProfile recorded {calls} calls of leaf, not {n}")


TOOLS = ("streamscope", "viztracer", "cProfile")


def measure_k(k: int, n: int, reps: int) -> list[Summary]:
    variants: list[tuple[str, Callable[[], tuple[float, ...]]]] = [
        ("bare", lambda: (cpu_per_call(leaf, n, k),)),
        ("streamscope", lambda: (streamscope(n, k),)),
        ("viztracer", lambda: (viztracer(n, k),)),
        ("cProfile", lambda: (cprofile(n, k),)),
    ]
    return interleave(variants, reps)[0]


def calls_for(k: int, budget_s: float) -> int:
    """Calls that take about ``budget_s`` of CPU bare."""
    per_call = min(cpu_per_call(leaf, 200, k) for _ in range(3))
    return max(50, int(budget_s * 1e9 / per_call))


def per_call_costs(n: int, reps: int) -> list[Summary]:
    """ns per call of a leaf that does nothing (k = 0), for each way of running it."""
    unbound: list[float] = []

    def in_unbound_thread() -> tuple[float, ...]:
        t = threading.Thread(target=lambda: unbound.append(streamscope(n, 0, bind=False)))
        t.start()
        t.join()
        return (unbound[-1],)

    variants: list[tuple[str, Callable[[], tuple[float, ...]]]] = [
        ("bare", lambda: (cpu_per_call(leaf, n, 0),)),
        ("streamscope, disabled", lambda: (streamscope(n, 0, enabled=False),)),
        ("streamscope, unbound thread", in_unbound_thread),
        ("streamscope, traced", lambda: (streamscope(n, 0),)),
        ("viztracer", lambda: (viztracer(n, 0),)),
        ("cProfile", lambda: (cprofile(n, 0),)),
    ]
    return interleave(variants, reps)[0]


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    quick = args.quick
    reps = args.reps or (1 if quick else 5)
    ks = (4_000, 400, 40) if quick else (40_000, 12_000, 4_000, 1_200, 400, 120, 40)
    budget_s = 0.03 if quick else 0.25
    print(machine())
    print(
        f"{reps} interleaved repetitions; CPU time of the calling thread; ~{budget_s} s bare each"
    )
    rows = []
    met = []
    for k in ks:
        check_peers(k, 100 if quick else 500)
        n = calls_for(k, budget_s)
        results = measure_k(k, n, reps)
        bare = results[0]
        slow = {s.name: paired_ratios(s, bare).median for s in results[1:]}
        excess = (slow["streamscope"] - 1) / max(slow["viztracer"] - 1, 1e-9)
        met.append(slow["streamscope"] <= slow["viztracer"])
        calls_per_s = 1e9 / bare.median
        rows.append(
            [
                f"{k:,}",
                f"{calls_per_s:,.0f}",
                f"{2 * calls_per_s:,.0f}",
                *(f"{slow[t]:.2f}x" for t in TOOLS),
                f"{excess:.2f}",
            ]
        )
    print("\nslowdown (traced / bare CPU time) by traced call rate")
    headers = ["k", "bare calls/s", "events/s", *TOOLS, "ss/viz excess ratio"]
    print(table(headers, rows))

    costs = per_call_costs(20_000 if quick else 300_000, reps)
    bare0 = costs[0].median
    print("\ncost of one call of an empty leaf (k = 0)")
    print(
        table(
            ["variant", "ns/call", "added ns/call", "vs bare"],
            [
                [s.name, f"{s.median:,.0f}", f"{s.median - bare0:,.0f}", f"{s.median / bare0:.2f}x"]
                for s in costs
            ],
        )
    )
    print(
        f"\ndrain (on the agent's thread, not timed above): "
        f"{statistics.median(drain_ns):.1f} ns per event"
    )
    verdict = "met" if all(met) else f"missed at {met.count(False)} of {len(met)} rates"
    print(f"target: streamscope slowdown <= viztracer's at every rate: {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
