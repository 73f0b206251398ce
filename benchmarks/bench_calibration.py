"""Time to fit one calibration burst: the convex-hull fit against the same LP solved by scipy.

In: synthetic bursts (a 20 ppm clock read through PCIe-like round trips: 500 ns floors plus
150 ns exponential jitter, spread over 1 s). Out: a table of ms per fit for ``fit_hull``,
``fit_timetrial`` and ``scipy.optimize.linprog`` (HiGHS) on the hull's max-margin LP, their
ratios, and how the hull's time grows with the burst's size.

    python benchmarks/bench_calibration.py [--quick] [--reps N]
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
from scipy.optimize import linprog

from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.timebase.calibration import Exchanges, Fit, fit_hull, fit_timetrial

TARGET_MS = 10.0
HOST0 = 10**12


def bursts(n: int, count: int, seed: int = 0) -> list[Exchanges]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        s, c = 1 + 20e-6, rng.uniform(0, 1e6)
        t1 = np.sort(rng.uniform(0, 1e9, n))
        t2 = t1 + 500 + rng.exponential(150, n)
        t3 = t2 + 500 + rng.exponential(150, n)
        out.append(
            Exchanges(
                t1_ns=HOST0 + np.floor(t1).astype(np.int64),
                t2_ticks=10**9 + np.floor((t2 - c) / s).astype(np.int64),
                t3_ns=HOST0 + np.floor(t3).astype(np.int64),
            )
        )
    return out


def fit_linprog(ex: Exchanges) -> tuple[float, float]:
    """The peer: the hull's estimate as an LP. Maximise the margin m by which the line clears
    every tick-aware constraint, s*(t2+1) + b >= t1 + m and s*t2 + b <= t3 + 1 - m (centred and
    scaled so the solver sees numbers near 1). Returns (s ns/tick, b ns at the burst's centre)."""
    t2_lo, t2_hi = int(ex.t2_ticks.min()), int(ex.t2_ticks.max())
    x0 = (t2_lo + t2_hi + 1) // 2
    y0 = (int(ex.t1_ns.min()) + int(ex.t3_ns.max())) // 2
    sc = float(t2_hi - x0 + 1)
    x = (ex.t2_ticks - x0).astype(np.float64) / sc
    lo = (ex.t1_ns - y0).astype(np.float64)
    hi = (ex.t3_ns - y0).astype(np.float64) + 1
    one = np.ones_like(x)
    a_ub = np.vstack([np.c_[-(x + 1 / sc), -one, one], np.c_[x, one, one]])
    b_ub = np.concatenate([-lo, hi])
    res = linprog([0, 0, -1], A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * 3, method="highs")
    if res.status != 0:
        raise RuntimeError(f"linprog failed: {res.message}")
    return float(res.x[0] / sc), float(res.x[1] + y0)


def per_fit(fn: Callable[[Exchanges], object], data: list[Exchanges]) -> Callable[[], tuple[float, float]]:  # fmt: skip
    """A measure: ms per fit over every burst in ``data``, by wall and by CPU time."""

    def run() -> tuple[float, float]:
        w0, c0 = time.perf_counter_ns(), time.process_time_ns()
        for ex in data:
            fn(ex)
        w1, c1 = time.perf_counter_ns(), time.process_time_ns()
        return (w1 - w0) / 1e6 / len(data), (c1 - c0) / 1e6 / len(data)

    return run


def check_same_line(data: list[Exchanges]) -> tuple[float, float]:
    """The LP and the hull must find the same line: the largest gap between them across a burst
    (ns; absolute host ns are float64, ~1e-4 ns apart) and between their rates (ppb)."""
    gap_ns = gap_ppb = 0.0
    for ex in data:
        f: Fit = fit_hull(ex)
        s, b = fit_linprog(ex)
        ends = np.array([f.x_lo_ticks, f.x_hi_ticks], dtype=np.int64)
        lp = s * (ends - f.x0_ticks).astype(np.float64) + b
        gap_ns = max(gap_ns, float(np.max(np.abs(lp - f.to_ns(ends)))))
        gap_ppb = max(gap_ppb, abs(s / f.s_ns_per_tick - 1) * 1e9)
    if gap_ns > 0.01:
        raise RuntimeError(f"linprog and fit_hull disagree by {gap_ns:.3g} ns: not the same LP")
    return gap_ns, gap_ppb


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (5 if args.quick else 15)
    count = 4 if args.quick else 10
    data = bursts(1000, count)
    gap_ns, gap_ppb = check_same_line(data)
    print(machine())
    print(f"{count} bursts of 1000 exchanges over 1 s; {reps} interleaved repetitions; "
          f"linprog and fit_hull agree within {gap_ns:.1e} ns across every burst "
          f"and {gap_ppb:.1e} ppb in rate")  # fmt: skip
    variants = [
        ("fit_hull", per_fit(fit_hull, data)),
        ("fit_timetrial", per_fit(fit_timetrial, data)),
        ("linprog (HiGHS)", per_fit(fit_linprog, data)),
    ]
    wall, cpu = interleave(variants, reps, metrics=2)
    rows = []
    for clock, sums in (("wall", wall), ("CPU", cpu)):
        hull = sums[0]
        for s in sums:
            r: Summary = paired_ratios(s, hull)
            rows.append([s.name, clock, f"{s.median:.3f}", fmt_spread(s), f"{s.best:.3f}",
                         f"{r.median:.1f}x", f"{r.best:.1f}..{max(r.samples):.1f}"])  # fmt: skip
    print()
    print(table(["variant", "clock", "ms/fit", "spread", "best", "vs hull", "range"], rows))

    sizes = (100, 1000, 10_000) if args.quick else (100, 1000, 10_000, 100_000)
    scaling = [(f"n={n}", per_fit(fit_hull, bursts(n, 2, seed=1))) for n in sizes]
    scale = interleave(scaling, max(3, reps // 3), metrics=2)[0]
    print()
    print(table(["fit_hull", "ms/fit", "spread", "µs per exchange"],
                [[s.name, f"{s.median:.3f}", fmt_spread(s), f"{1e3 * s.median / n:.2f}"]
                 for s, n in zip(scale, sizes, strict=True)]))  # fmt: skip
    hull_ms = wall[0].median
    verdict = "meets" if hull_ms < TARGET_MS else "misses"
    lp_ratio = paired_ratios(wall[2], wall[0]).median
    print(f"\ntarget: 1000 exchanges in < {TARGET_MS:.0f} ms: fit_hull {hull_ms:.2f} ms wall "
          f"({verdict} it on this machine), {lp_ratio:.0f}x faster than linprog on the same LP")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
