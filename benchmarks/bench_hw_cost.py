"""What the probe cores cost in logic, swept over their parameters, beside the seeds' trends.

In: configurations of the ``trigger`` core (value width and trigger depth; counter width) and of
the two storage schemes (number of probes), synthesised by Yosys for an iCE40 and placed and
routed by nextpnr (``streamscope.hw.cost``; deterministic tools: one run each). Out: LUT4s,
flip-flops and the maximum frequency behind the register bank, each as a ratio to the sweep's
smallest configuration; and the seeds' published trends beside ours: seed 001 (CARMA, Figs.
3-8) finds area rising with trigger width and depth and the frequency falling with width, and
centralised storage smaller than distributed as probes are added; seed 003 (PPW+RC, Table 1)
a whole measurement module at +3.9 % logic and -2.6 % Fmax of its Stratix-II design.

    python benchmarks/bench_hw_cost.py [--quick]
"""

from __future__ import annotations

from _harness import parse_args, table
from streamscope.hw.cost import Cost, cost

_done: dict[tuple[str, tuple[str, ...], bool], Cost] = {}


def sweep(core: str, configs: list[list[str]], pnr: bool = True) -> list[tuple[list[str], Cost]]:
    """Each configuration's cost (once: the tools are deterministic)."""
    out = []
    for params in configs:
        key = (core, tuple(params), pnr)
        if key not in _done:
            _done[key] = cost(core, params, pnr=pnr, bank=pnr)
        out.append((params, _done[key]))
    return out


def rows(results: list[tuple[list[str], Cost]]) -> list[list[str]]:
    base = results[0][1]
    out = []
    for params, c in results:
        fmax = c.fmax_mhz or float("nan")
        placed = [f"{fmax:.1f}", f"{fmax / (base.fmax_mhz or float('nan')):.2f}x"]
        if not c.fits:
            placed = ["no fit", "-"]  # more logic cells or pins than an HX8K has
        elif c.fmax_mhz is None:
            placed = ["not placed", "-"]
        out.append(
            [" ".join(params), str(c.core.luts), f"{c.core.luts / base.core.luts:.2f}x",
             str(c.core.ffs), str(c.banked.luts), *placed]
        )  # fmt: skip
    return out


HEADERS = ["configuration", "LUT4", "LUT4 ratio", "FF", "LUT4 banked", "Fmax MHz", "Fmax ratio"]


def trend(results: list[tuple[list[str], Cost]], what: str) -> str:
    """Whether LUTs rise and Fmax falls from the first configuration to the last."""
    first, last = results[0][1], results[-1][1]
    rises = last.core.luts > first.core.luts
    said = f"{what}: LUT4s {'rise' if rises else 'do not rise'} "
    said += f"({last.core.luts / first.core.luts:.1f}x)"
    if first.fmax_mhz and last.fmax_mhz:
        falls = last.fmax_mhz < first.fmax_mhz
        said += f", Fmax {'falls' if falls else 'does not fall'} "
        said += f"({last.fmax_mhz / first.fmax_mhz:.2f}x)"
    return said


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    widths = [8, 16] if args.quick else [8, 16, 32, 64]
    depths = [1, 2] if args.quick else [1, 2, 4, 8]
    levels = 2 if args.quick else 4
    pnr = not args.quick  # (quick: the cores alone, synthesised only: no bank, no Fmax)
    width_sweep = sweep("trigger", [[f"width={w}", f"max_depth={levels}"] for w in widths], pnr)
    depth_sweep = sweep("trigger", [["width=16", f"max_depth={d}"] for d in depths], pnr)
    print(f"trigger probe, value width ({levels} levels):")
    print(table(HEADERS, rows(width_sweep)))
    print(trend(width_sweep, "seed 001: wider triggers cost more and run slower; ours"))
    print("trigger probe, trigger depth (16-bit values):")
    print(table(HEADERS, rows(depth_sweep)))
    print(trend(depth_sweep, "seed 001: deeper triggers cost more; ours"))
    probes = [1, 2] if args.quick else [2, 4, 8]
    samples = 2 if args.quick else 16
    for scheme in ("central", "distributed"):
        res = sweep(scheme, [[f"probes={n}", f"capacity={samples}", "value_width=16"]
                             for n in probes], pnr)  # fmt: skip
        print(f"{scheme} storage, probes ({samples} samples a buffer):")
        print(table(HEADERS, rows(res)))
        if scheme == "central":
            central = res
    ratios = []
    for (params, c), (_, d) in zip(central, res, strict=True):
        ratios.append((c.core.luts + c.core.ffs) / (d.core.luts + d.core.ffs))
        print(f"  {params[0]}: central/distributed flip-flops {c.core.ffs / d.core.ffs:.2f}x, "
              f"LUT4s {c.core.luts / d.core.luts:.2f}x")  # fmt: skip
    smaller = all(r < 1 for r in ratios) and ratios == sorted(ratios, reverse=True)
    print(
        "seed 001: centralised storage is smaller than distributed, the more so as probes are "
        f"added; ours: {'agrees' if smaller else 'differs'} (cells, central/distributed: "
        + ", ".join(f"{r:.2f}x" for r in ratios)
        + "; our buffers are flip-flops, not block RAM)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
