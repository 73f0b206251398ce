"""The virtual-queue verdict's error rates, measured: sources x bus settings x seeds, each run
against the application's own record of every item (ground truth).

Each run: ``examples/vq.py``'s source -> server -> sink with one end of ``source -> server`` on
the emulated device (over its bulk-transfer bus), 200 ms frames, ``--ground-truth`` on. The
device's clock and the service-time kind change from seed to seed (seed k: clock
``CLOCKS[k % 3]``, service ``SERVICES[k % 2]``). A run's estimate is *accurate* when its mean
per-frame W1 to the true occupancy is within the tolerance the monitor decides with (the larger
of 15 % of the mean occupancy and 1 item); then a rejection is a false alarm; an inaccurate
estimate that is accepted is a miss. Per row (a source on a bus): seeds, accurate, accepted,
false alarms, misses, median W1 / true mean, and which part of the check decided the frames.

    python benchmarks/bench_vq_battery.py --seeds 10          # the whole battery (~20 min)
    python benchmarks/bench_vq_battery.py --quick             # a smoke run: one run

Target: false alarms (accurate, yet rejected) and misses (inaccurate, yet accepted) each at
most 5 % of the runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _vqrun import truth_frames  # noqa: E402

FRAME = "200ms"
SECONDS = 2.2  #: each run's length: eleven frames
#: The device's clock, by seed: rate errors either side, one drifting.
CLOCKS = (
    "rate_ppm=25,offset_s=3.5,drift_ppb_s=10,tick_ns=7.5",
    "rate_ppm=-60,offset_s=2,tick_ns=7.5",
    "rate_ppm=120,offset_s=-1,drift_ppb_s=-20,tick_ns=5",
)
SERVICES = ("uniform", "exp")


@dataclass(frozen=True)
class Bus:
    label: str
    args: tuple[str, ...]


BUSES = (
    Bus("bulk 1", ("--bulk", "1", "--transfer-us", "100", "--latency-us", "20",
                   "--timeout-ms", "1")),
    Bus("bulk 16", ("--bulk", "16", "--transfer-us", "400", "--latency-us", "100",
                    "--timeout-ms", "8")),
    Bus("bulk 32", ("--bulk", "32", "--transfer-us", "600", "--latency-us", "150",
                    "--timeout-ms", "5")),
)  # fmt: skip


@dataclass(frozen=True)
class Source:
    label: str
    kind: str  # examples/vq.py --arrivals
    rho: float
    iid: bool
    module: str = "vq_mm1_hw2sw"  # which end is on the device
    service: str | None = None  # every seed's service kind (None: by seed)
    clock: str | None = None  # every seed's device clock (None: by seed)
    buses: tuple[str, ...] | None = None  # the buses it runs on (None: all)


SOURCES = (
    Source("exp", "exp", 0.7, True),
    Source("h2", "h2", 0.72, True),
    Source("det", "det", 0.7, True),
    Source("lognormal", "lognormal", 0.7, True),
    Source("onoff", "onoff", 0.2, False),
    Source("periodic", "periodic", 0.6, False),
    Source("mmpp", "mmpp", 0.6, False),
    Source("ar1 (Lancaster et al.)", "ar1", 0.6, False),
    Source("exp sw->hw", "exp", 0.7, True, "vq_mm1_sw2hw"),
    Source("lognormal sw->hw", "lognormal", 0.7, True, "vq_mm1_sw2hw"),
    # A case unlike the examples: uniform 0.4-1.4 ms services, a device clock at -60 ppm.
    Source(
        "h2, -60 ppm, uniform",
        "h2",
        0.72,
        True,
        service="uniform",
        clock=CLOCKS[1],
        buses=("bulk 32",),
    ),
)

#: What ``--quick`` runs (a smoke test): the case unlike the examples, one seed.
QUICK = (("h2, -60 ppm, uniform", "bulk 32"),)


def tolerance(mean_items: float, share: float = 0.15, floor: float = 1.0) -> float:
    return max(share * mean_items, floor)


@dataclass(frozen=True)
class Outcome:
    accurate: bool
    accepted: bool
    ratio: float  # mean per-frame W1 to the truth / mean true occupancy
    decided: Counter[str]
    frames: list[dict[str, Any]]
    run: dict[str, Any]


def one_run(src: Source, bus: Bus, seed: int, out: Path) -> Outcome:
    import importlib

    mod = importlib.import_module(src.module)
    service_ms = 0.9
    items = max(int(src.rho / service_ms * 1e3 * SECONDS), 50)
    argv = [
        "--arrivals", src.kind, "--rho", str(src.rho),
        "--service", src.service or SERVICES[seed % 2], "--service-ms", str(service_ms),
        *bus.args, "--device-clock", src.clock or CLOCKS[seed % 3],
        "--seed", str(seed), "--items", str(items),
    ]  # fmt: skip
    p = mod.pipeline(argv)
    q = [f"occupancy(source -> server): mean, max, histogram every {FRAME}"]
    vq, frames = truth_frames(p, q, out, f"{src.label} {bus.label} seed {seed}")
    truth = statistics.mean(f["truth_mean"] for f in frames)
    w1 = statistics.mean(f["w1_truth_items"] for f in frames)
    decided = Counter(str(f.get("decided_by")) for f in frames if f.get("verdict"))
    run_info = {k: v for k, v in vq.items() if k != "frames_detail"}
    return Outcome(
        accurate=w1 <= tolerance(truth),
        accepted=vq["verdict"] == "consistent",
        ratio=w1 / max(truth, 1e-9),
        decided=decided,
        frames=frames,
        run=run_info,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="one run (smoke test)")
    ap.add_argument("--only", nargs="+", help="sources whose label starts with one of these")
    ap.add_argument("--dump", type=Path, help="write every run's frames here (JSON lines)")
    a = ap.parse_args(argv)
    cells = [(s, b) for s in SOURCES for b in BUSES if s.buses is None or b.label in s.buses]
    if a.only:
        cells = [(s, b) for s, b in cells if any(s.label.startswith(o) for o in a.only)]
    seeds = range(1, a.seeds + 1)
    if a.quick:
        cells = [(s, b) for s, b in cells if (s.label, b.label) in QUICK]
        seeds = range(1, 2)
    tmp = Path(tempfile.mkdtemp(prefix="bench-vq-battery-"))
    dump = a.dump.open("w") if a.dump else None
    print(f"{'source':24} {'bus':8} {'gaps':9} {'runs':>4} {'accurate':>8} {'accepted':>8} "
          f"{'false alarm':>11} {'miss':>4} {'W1/true':>7}  frames decided by")  # fmt: skip
    total = Counter[str]()
    t0 = time.monotonic()
    stops: list[tuple[bool, float]] = []
    for src, bus in cells:
        outs = []
        for seed in seeds:
            o = one_run(src, bus, seed, tmp / "run.duckdb")
            outs.append(o)
            if dump is not None:
                dump.write(json.dumps({
                    "source": src.label, "bus": bus.label, "seed": seed, "iid": src.iid,
                    "run": o.run, "frames": o.frames,
                }, default=str) + "\n")  # fmt: skip
                dump.flush()
        n = len(outs)
        acc = sum(o.accurate for o in outs)
        ok = sum(o.accepted for o in outs)
        fa = sum(o.accurate and not o.accepted for o in outs)
        miss = sum(o.accepted and not o.accurate for o in outs)
        decided = Counter[str]()
        for o in outs:
            decided.update(o.decided)
        total.update(runs=n, accurate=acc, accepted=ok, false_alarms=fa, misses=miss)
        shown = ", ".join(f"{k} {v}" for k, v in decided.most_common())
        label = src.label[:24]
        print(
            f"{label:24} {bus.label:8} {'i.i.d.' if src.iid else 'dependent':9} {n:4d} "
            f"{acc:8d} {ok:8d} {fa:11d} {miss:4d} "
            f"{statistics.median(o.ratio for o in outs):7.3f}  {shown}",
            flush=True,
        )
        stops.extend(s for o in outs if (s := stopped_frame(o.frames)) is not None)
    n = total["runs"]
    fa_rate = total["false_alarms"] / n
    miss_rate = total["misses"] / n
    met = fa_rate <= 0.05 and miss_rate <= 0.05
    print(
        f"\n{n} runs in {time.monotonic() - t0:.0f} s: accurate {total['accurate']}, accepted "
        f"{total['accepted']}; false alarms {total['false_alarms']} ({fa_rate:.1%}), misses "
        f"{total['misses']} ({miss_rate:.1%}); target both <= 5 %: {'met' if met else 'MISSED'}"
    )
    # The frame a device's source stopped in, the host draining the link for the rest of it
    # (where the source stopped at a frame's edge, a run has none): estimated over the whole
    # frame, never the source's level for the whole frame (185 % over, once).
    held = sum(ok for ok, _ in stops)
    worst = max((err for _, err in stops), default=float("nan"))
    met = held == len(stops) and worst <= 0.5
    print(
        f"frames a device's source stopped in, the link draining after it: {len(stops)} of {n} "
        f"runs; accurate or rejected in {held}, worst |estimate - truth| {worst:.1%} of the "
        f"truth; target all, <= 50 %: {'met' if met else 'MISSED'}"
    )
    return 0


def stopped_frame(frames: list[dict[str, Any]]) -> tuple[bool, float] | None:
    """A run's frame its device's source stopped in (its last with insertions), where the host
    drained the link after it: (accurate or rejected, |estimate - truth| / truth); None where
    the source stopped at the frame's end (nothing drained in it)."""
    last = frames[-1]
    if last["items_out"] <= last["items_in"] or not last["truth_mean"]:
        return None
    accurate = last["w1_truth_items"] <= tolerance(last["truth_mean"])
    err = abs(last["predicted_mean"] - last["truth_mean"]) / last["truth_mean"]
    return accurate or last["verdict"] == "rejected", err


if __name__ == "__main__":
    raise SystemExit(main())
