"""How fast the RTL device simulates its probe cores: Amaranth's simulator against Verilator.

In: the same design driven the same way by each simulator, in one process: (1) the central
storage core of the Game of Life experiment (8 probes, 2 write ports) busy every cycle with
random offers, the simulator alone; (2) the RTL device's own path, ``hw.rtl.RtlStorage``, fed
the Life model's samples (DeVille, Troxel & George 2005, section 5.2) and read out over the register link as the
device runs; (3) calibration readings of the timestamp core (``RtlClock``); (4) the RTL
device's sub-queue reducer (``hw.subqueue.CoreSubQueue``: the channel monitor core in Laplace's
configuration, 337 gap bins, production gaps, 128 sub-windows) fed a random bounded channel at
its ticks and read frame by frame over the link. Out: cycles (or
readings) per second of each simulator and their ratio, with the check that both gave the
same counts and samples; and what building the Verilator library took (Verilator and g++,
once per configuration; later runs find it in the cache).

    python benchmarks/bench_rtl_sim.py [--quick] [--generations N]
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Any

from _harness import parser, table
from streamscope.hw.link import Registers
from streamscope.hw.regmap import RegisterBank
from streamscope.hw.rtl import RtlClock, RtlStorage, make_link
from streamscope.hw.storage import CentralStorageCore
from streamscope.hw.subqueue import CoreSubQueue
from streamscope.hw.verilated import available
from streamscope.probes.taps import Recorder
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import life

PROBES, PORTS, CAPACITY = 8, 2, 1024
#: The channel core as Laplace configures it: sub-window profiles and occupancy levels.
PROFILE, LEVELS = 128, 66
SIMS = ("amaranth", "verilator")


def busy(sim: str, cycles: int) -> tuple[float, Any]:
    """Cycles a second with every probe offering at random; the core's counts and samples."""
    core = CentralStorageCore(PROBES, 64, 32, CAPACITY, PORTS, 1, 32)
    bank = RegisterBank(core, core.EVENTS)
    link = make_link(bank, sim)
    rng = random.Random(7)
    rows = [
        [x for i in range(PROBES) if rng.random() < 0.3
         for x in ((bank.offer[i], 1), (bank.value[i], rng.getrandbits(64)))]
        for _ in range(cycles)
    ]  # fmt: skip
    start = time.perf_counter()
    link.play(rows)
    took = time.perf_counter() - start
    regs = Registers(link, bank.registers)
    counts = [regs.get(f"{c}[{i}]") for c in ("written", "contention") for i in range(PROBES)]
    samples = []
    for _ in range(regs.get("level")):
        samples.append((regs.get("head_probe"), regs.get("head_ticks"), regs.get("head_value")))
        regs.set("pop", 1)
    link.close()
    return cycles / took, (counts, samples)


def device(sim: str, generations: int) -> tuple[float, float, Any]:
    """The RTL device's storage fed the Life model's samples: its cycles a second (offers,
    the arbiter's idle cycles and the read-outs over the link), samples a second, and what it
    kept and refused."""
    store = RtlStorage("centralized", capacity=CAPACITY, ports=PORTS, recorder=Recorder(), sim=sim)
    ports = [store.port(100 + k) for k in range(PROBES)]
    offers = list(life.offers(64, 40, 13, 3, generations, PROBES))
    ports[0].offer(0, 0, 0)  # builds the core (and Verilator's library) before the clock starts
    start = time.perf_counter()
    n = 0
    for cycle, ks in offers:
        for k in ks:
            ports[k].offer(3 * cycle, k, cycle + 1)
            n += 1
    store.settle()
    took = time.perf_counter() - start
    kept = []
    for tap in store.taps():
        recs, dropped = tap.drain()
        kept.append((len(recs), dropped))
    cycles = store.link.cycles
    store.close()
    return cycles / took, n / took, ([(p.written, p.contention) for p in ports], kept)


def clock(sim: str, readings: int) -> float:
    spec = EmulatedClockSpec.parse("rate_ppm=25,offset_s=3.5,tick_ns=7.5")
    rtl = RtlClock(EmulatedClock(spec, time.monotonic_ns(), domain="fpga"), sim=sim)
    rtl.now_ticks()
    start = time.perf_counter()
    for _ in range(readings):
        rtl.now_ticks()
    took = time.perf_counter() - start
    rtl.close()
    return readings / took


def subqueue(sim: str, frames: int) -> tuple[float, float, Any]:
    """Frames (and cycles) a second of the channel monitor core reducing a channel of 7.5 ns
    ticks on 1 ms frames (an item every 3 us on average); its summaries."""
    import numpy as np

    rng = np.random.default_rng(1)
    period = 133_333  # ticks: 1 ms
    n = frames * 330
    t_in = np.cumsum(rng.integers(1, 800, n)).astype(np.int64)
    t_out = np.maximum.accumulate(t_in + rng.integers(1, 400, n)) + np.arange(n)
    core = CoreSubQueue(7.5, states=True, profile=PROFILE, levels=LEVELS, sim=sim)
    core.set_grid(0, period)
    seq = np.arange(1, n + 1)
    start = time.perf_counter()
    before = core.link.cycles
    core.add_insertions(t_in, seq)
    core.add_removals(t_out, seq)
    core.add_states(t_in[::5], np.full(t_in[::5].size, 3))  # BLOCKED_OUT now and then
    core.add_states(t_in[2::5], np.full(t_in[2::5].size, 1))
    out = core.close_until(frames * period)
    cycles = core.link.cycles - before
    took = time.perf_counter() - start
    core.finish(frames * period)
    return len(out) / took, cycles / took, out


def main() -> None:
    ap = parser(__doc__ or "")
    ap.add_argument("--generations", type=int, default=None)
    args = ap.parse_args()
    if not available():
        sys.exit("bench_rtl_sim: Verilator and g++ are needed (make test installs them)")
    quick = args.quick
    if quick:  # smaller designs: every line runs, and Verilator builds each in a second or two
        global PROBES, CAPACITY, PROFILE, LEVELS
        PROBES, CAPACITY, PROFILE, LEVELS = 2, 64, 4, 8
    generations = args.generations or (3 if quick else 200)
    cycles = 500 if quick else 20000
    readings = 0 if quick else 2000
    # Build (or find) the Verilator libraries first, and say what that took.
    start = time.perf_counter()
    core = CentralStorageCore(PROBES, 64, 32, CAPACITY, PORTS, 1, 32)
    make_link(RegisterBank(core, core.EVENTS), "verilator").close()
    built = time.perf_counter() - start
    rows, same = [], []

    def row(label: str, each: dict[str, float], fmt: str, ratio: str) -> None:
        """One workload: each simulator's figure and Verilator's over Amaranth's."""
        rows.append([label, *(format(each[s], fmt) for s in SIMS),
                     format(each["verilator"] / each["amaranth"], ratio) + "x"])  # fmt: skip

    got = {sim: busy(sim, cycles) for sim in SIMS}
    row("storage core, every cycle busy (cycles/s)", {s: got[s][0] for s in SIMS}, ",.0f", ".0f")
    same.append(got["amaranth"][1] == got["verilator"][1])
    dev = {sim: device(sim, generations) for sim in SIMS}
    row(f"RTL device, Life {generations} generations (cycles/s)", {s: dev[s][0] for s in SIMS},
        ",.0f", ".1f")  # fmt: skip
    row("  the same, samples/s", {s: dev[s][1] for s in SIMS}, ",.0f", ".1f")
    same.append(dev["amaranth"][2] == dev["verilator"][2])
    frames = 3 if quick else 40
    sq = {sim: subqueue(sim, frames) for sim in SIMS}
    row(f"channel core, {frames} frames of a sub-queue (frames/s)", {s: sq[s][0] for s in SIMS},
        ",.1f", ".0f")  # fmt: skip
    row("  the same, cycles/s", {s: sq[s][1] for s in SIMS}, ",.0f", ".0f")
    same.append(sq["amaranth"][2] == sq["verilator"][2])
    if readings:
        clk = {sim: clock(sim, readings) for sim in SIMS}
        row("timestamp core, calibration readings/s", clk, ",.0f", ".0f")
    print(table(["workload", "Amaranth", "Verilator", "ratio"], rows))
    print(f"Verilator library of the storage core: {built:.1f} s to build or find")
    print(f"both simulators gave the same counts and samples: {all(same)}")
    if not all(same):
        sys.exit("bench_rtl_sim: the two simulators disagree")


if __name__ == "__main__":
    main()
