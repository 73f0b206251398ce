"""Virtual queues on the micro-benchmarks of Lancaster et al. 2011, over many seeds, against the ground truth.

For each of ``examples/vq_*.py`` and each seed: one monitored run with ``ground_truth`` on, then
the run's verdict (self-check of the tandem bulk-bus model against the two visible buffers) and
the W1 distance (items) of the tandem and of the ideal-queue model's predicted occupancy to the
true occupancy. Prints acceptance rates for the i.i.d. sources, the rejection rate for the
correlated one, and, for M/D/1 software -> hardware, how far the true occupancy is from M/D/1
theory (Pollaczek-Khinchine mean; distribution by an exact Lindley replay of M/D/1).

    python benchmarks/bench_vq_selfcheck.py --seeds 20 --items 3000
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))

import streamscope as ss  # noqa: E402
from streamscope.model import lindley_fifo, occupancy_from_events, w1_items  # noqa: E402

EXAMPLES = ("vq_mm1_sw2hw", "vq_mm1_hw2sw", "vq_md1_sw2hw", "vq_correlated_hw2sw")


def one_run(name: str, seed: int, items: int, out: Path) -> dict[str, object]:
    mod = importlib.import_module(name)
    p = mod.pipeline(["--seed", str(seed), "--items", str(items)])
    res = ss.run(
        p, mod.QUERIES, ss.RunOptions(out=out, overwrite=True, ground_truth=True, mode="inline")
    )
    if res.status != "completed":
        raise SystemExit(f"{name} seed {seed}: {res.status}: {res.error}")
    with ss.load(out) as run:
        (vq,) = run.virtual_queues()
        _, rows = run.sql(
            "SELECT level, sum(fraction) FROM vq_level WHERE series = 'truth' GROUP BY level "
            "ORDER BY level"
        )
    truth = np.zeros(max((int(r[0]) for r in rows), default=0) + 1)
    for level, frac in rows:
        truth[int(level)] = frac
    return {**vq, "truth": truth / truth.sum() if truth.sum() else truth}


def md1_theory(rho: float, service_ns: float, n: int = 400_000) -> tuple[float, np.ndarray]:
    """M/D/1 waiting-room occupancy: P-K mean Lq and its distribution by exact replay."""
    lq = rho * rho / (2.0 * (1.0 - rho))
    rng = np.random.default_rng(12345)
    a = np.cumsum(rng.exponential(service_ns / rho, n))
    d = lindley_fifo(a, np.full(n, service_ns))
    start = np.maximum(a, np.concatenate(([0.0], d[:-1])))  # service start: leaves the queue
    _, ns = occupancy_from_events(a, start, float(a[0]), float(a[-1]))
    return lq, ns / ns.sum()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--items", type=int, default=3000)
    ap.add_argument("--quick", action="store_true", help="one seed, few items (smoke test)")
    ap.add_argument("--examples", nargs="+", choices=EXAMPLES, default=EXAMPLES)
    a = ap.parse_args(argv)
    seeds, items = (1, 600) if a.quick else (a.seeds, a.items)
    tmp = Path(tempfile.mkdtemp(prefix="bench-vq-"))
    print(f"{'example':22} {'seeds':>5} {'consistent':>10} {'W1 tandem':>10} {'W1 ideal':>9} "
          f"{'mean pred':>9} {'mean true':>9}")  # fmt: skip
    md1_truth: list[np.ndarray] = []
    verdicts: list[tuple[str, float, float]] = []
    for name in a.examples:
        runs = [one_run(name, s, items, tmp / f"{name}-{s}.duckdb") for s in range(1, seeds + 1)]
        ok = sum(r["verdict"] == "consistent" for r in runs)
        wt = [float(r["w1_truth_items"]) for r in runs if r["w1_truth_items"] is not None]  # type: ignore[arg-type]
        wi = [
            float(r["w1_truth_ideal_items"]) for r in runs if r["w1_truth_ideal_items"] is not None
        ]  # type: ignore[arg-type]
        pm, tm = [], []
        for r in runs:
            for f in r["frames_detail"]:  # type: ignore[attr-defined]
                if f["predicted_mean"] is not None and f["truth_mean"] is not None:
                    pm.append(f["predicted_mean"])
                    tm.append(f["truth_mean"])
        print(
            f"{name:22} {seeds:5d} {ok / seeds:10.0%} {statistics.median(wt) if wt else float('nan'):10.2f} "
            f"{statistics.median(wi) if wi else float('nan'):9.2f} "
            f"{statistics.mean(pm) if pm else float('nan'):9.2f} "
            f"{statistics.mean(tm) if tm else float('nan'):9.2f}"
        )
        if name == "vq_md1_sw2hw":
            md1_truth = [r["truth"] for r in runs]  # type: ignore[misc]
        if wt and wi:
            ratio = statistics.median(wi) / max(statistics.median(wt), 1e-9)
            verdicts.append((name, ok / seeds, ratio))
    for name, consistent, ratio in verdicts:
        want = "rejected in >= 95 %" if "correlated" in name else "consistent in >= 90 %"
        rate = 1.0 - consistent if "correlated" in name else consistent
        met = rate >= (0.95 if "correlated" in name else 0.90)
        print(
            f"{name}: target {want} of seeds: {rate:.0%} ({'met' if met else 'missed'}); "
            f"W1 to truth ideal/tandem ratio {ratio:.1f}x"
        )
    lq, dist = md1_theory(0.7, 1e6)
    if md1_truth:
        w = [w1_items(t, dist) for t in md1_truth]
        means = [float(np.dot(np.arange(t.size), t)) for t in md1_truth]
        print(
            f"M/D/1 sw->hw true mean occupancy {statistics.mean(means):.2f} items vs M/D/1 theory "
            f"(P-K) Lq {lq:.2f}; W1(true, M/D/1) median {statistics.median(w):.2f} items"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
