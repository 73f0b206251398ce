"""Centralised against distributed probe storage on the Game of Life (DeVille, Troxel & George 2005, §5.2).

Real monitored runs of ``examples/life.py`` (64 x 40 universe of traffic lights, one row per
clock cycle, event-driven probes on bands of columns) with 1 to 16 probes on each storage scheme.
Printed per probe count: the share of samples dropped with central storage (2 write ports, a
hold register of one sample per probe) and with distributed storage, beside the paper's figures
(0 %, 36 %, 68 % at 2, 4, 8 probes; distributed: none), and what a replay of the model's events
through the arbiter alone predicts. The central runs are made again on the RTL device
(``--rtl verilator``: the storage core, simulated, decides every write and drop; with
``--quick``, only the most probes), whose drops must be the replay's to the sample. The runs
must account for every sample the model says was taken (recorded + dropped), or the benchmark
fails.

Run: python benchmarks/bench_life.py [--quick] [--seed N]
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import streamscope as ss
from streamscope.probes.storage import CentralStorage

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SEED_001 = {2: 0.0, 4: 36.0, 8: 68.0}
WIDTH, HEIGHT, PORTS = 64, 40, 2


def load_life() -> ModuleType:
    spec = importlib.util.spec_from_file_location("life_example", EXAMPLES / "life.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_once(
    life: ModuleType, folder: Path, scheme: str, probes: int, argv: list[str], rtl: str = ""
) -> tuple[list[int], list[int], float]:
    """One monitored run: recorded and dropped per region probe, and its wall time (s)."""
    out = folder / f"life-{scheme}-{probes}{rtl}.duckdb"
    args = [*argv, "--probes", str(probes), "--storage", scheme, "--ports", str(PORTS), "--quiet"]
    args += ["--rtl", rtl] if rtl else []
    t0 = time.perf_counter()
    res = ss.run(life.pipeline(args), life.QUERIES, ss.RunOptions(out=out, mode="inline"))
    wall = time.perf_counter() - t0
    if res.status != "completed":
        raise SystemExit(f"life run ({scheme}, {probes} probes) {res.status}: {res.error}")
    recorded, dropped = [0] * probes, [0] * probes
    with ss.load(out) as run:
        region = {
            p.id: int(p.target.removeprefix("life.region"))
            for p in run.topology.probes
            if p.kind == "sampler"
        }
        for d in run.drops():
            if d.probe_id in region:
                recorded[region[d.probe_id]] += d.recorded
                dropped[region[d.probe_id]] += d.dropped
    return recorded, dropped, wall


def predicted(life: ModuleType, probes: int, lights: int, seed: int, gens: int) -> list[int]:
    """The model's events replayed through the central arbiter alone: (offered, dropped)."""
    store = CentralStorage(ports=PORTS, capacity=1 << 22)
    ports = [store.port(k) for k in range(probes)]
    for cycle, ks in life.offers(WIDTH, HEIGHT, lights, seed, gens, probes):
        for k in ks:
            ports[k].offer(cycle, 0, cycle=cycle)
    store.settle()
    return [sum(p.offered for p in ports), sum(p.contention + p.overflow for p in ports)]


def pct(part: int, whole: int) -> float:
    return 100.0 * part / whole if whole else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true", help="200 generations, 2/4/8 probes")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    gens, counts = (200, (2, 4, 8)) if a.quick else (2000, (1, 2, 4, 8, 16))
    life = load_life()
    lights = 13
    from streamscope.hw.verilated import available

    rtl_ok = available()
    if not rtl_ok:
        print("(no Verilator here: the RTL device's runs are left out)")
    argv = ["--width", str(WIDTH), "--height", str(HEIGHT), "--lights", str(lights)]
    argv += ["--seed", str(a.seed), "--generations", str(gens)]
    print(
        f"Game of Life {WIDTH}x{HEIGHT}, {lights} traffic lights (seed {a.seed}), {gens} "
        f"generations; central storage: {PORTS} write ports, hold 1; one row per cycle"
    )
    head = (
        f"{'probes':>6} | {'samples':>8} | {'centralized dropped %':>21} | "
        f"{'distributed dropped %':>21} | {'DeVille, Troxel & George 2005':>8} | {'arbiter replay %':>16} | "
        f"{'run s cen / dist':>16} | {'RTL device dropped %':>20}"
    )
    print(head)
    print("-" * len(head))
    broken = []
    central: dict[int, float] = {}
    distributed: dict[int, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            offered, replay_dropped = predicted(life, n, lights, a.seed, gens)
            rec_c, drop_c, wall_c = run_once(life, Path(tmp), "centralized", n, argv)
            rec_d, drop_d, wall_d = run_once(life, Path(tmp), "distributed", n, argv)
            runs = [("centralized", rec_c, drop_c), ("distributed", rec_d, drop_d)]
            rtl = "-"
            if rtl_ok and (not a.quick or n == counts[-1]):
                rec_r, drop_r, wall_r = run_once(
                    life, Path(tmp), "centralized", n, argv, "verilator"
                )
                runs.append(("centralized on the RTL device", rec_r, drop_r))
                rtl = f"{pct(sum(drop_r), offered):.1f} in {wall_r:.1f} s"
                if sum(drop_r) != replay_dropped:
                    broken.append(
                        f"RTL device, {n} probes: {sum(drop_r)} dropped, the arbiter "
                        f"{replay_dropped}"
                    )
            for scheme, rec, drop in runs:
                if sum(rec) + sum(drop) != offered:
                    broken.append(
                        f"{scheme}, {n} probes: {sum(rec)} recorded + {sum(drop)} dropped "
                        f"!= {offered} samples taken"
                    )
            central[n] = pct(sum(drop_c), offered)
            distributed[n] = pct(sum(drop_d), offered)
            seed = f"{SEED_001[n]:.0f} %" if n in SEED_001 else "-"
            print(
                f"{n:>6} | {offered:>8,} | {central[n]:>21.1f} | {distributed[n]:>21.1f} | "
                f"{seed:>8} | {pct(replay_dropped, offered):>16.1f} | "
                f"{wall_c:>7.2f} / {wall_d:<6.2f} | {rtl:>20}"
            )
    ratios = ", ".join(
        f"{n} probes {central[n] / SEED_001[n]:.2f}x"
        for n in counts
        if SEED_001.get(n) and n in central
    )
    print(f"ratio centralized / DeVille, Troxel & George 2005 drop share: {ratios}")
    shape = (
        central.get(2, 0.0) == 0.0
        and all(central[x] <= central[y] for x, y in zip(counts, counts[1:], strict=False))
        and max(distributed.values()) == 0.0
    )
    print(
        "target (DeVille, Troxel & George's (2005) shape): central drops 0 % at 2 probes and rise with probes, "
        f"distributed drops none: {'met' if shape else 'NOT met'}"
    )
    if broken:
        print("\n".join(broken), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
