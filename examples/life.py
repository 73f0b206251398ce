"""Conway's Game of Life on an emulated FPGA, watched by hardware probes (DeVille, Troxel & George 2005, §5.2).

    life -> show

A ``width`` x ``height`` universe (dead outside its edges) seeded with "traffic lights": four
blinkers around a centre, period 2, placed at random where no two can interact. The device
updates one row per clock cycle, every column of the row at once, so a generation takes
``height`` cycles and row ``r`` of generation ``g`` is computed at cycle ``g * height + r``.

``--probes N`` probes watch the universe in N bands of columns (``width // N`` columns each, the
last one takes the rest). Monitoring is event-driven: when any cell of row ``r`` in band ``k``
changed from generation ``g - 1`` to ``g``, probe ``k`` samples the new bits of that row segment
at that cycle. With ``--storage centralized`` the probes share one buffer with ``--ports``
writes per cycle and a round-robin arbiter; a probe still waiting for its turn cannot take a new
sample, and that sample is dropped (and counted). With ``--storage distributed`` every probe has
a buffer of its own. The paper's probes dropped 0 %, 36 % and 68 % of their samples with 2, 4 and
8 probes on central storage, and none on distributed storage.

The stage sends each generation's population to ``show`` on the host. With ``--rtl`` the device
is an RTL device: its probes' storage is the storage core, simulated cycle by cycle, and every
sample and drop comes from its arbiter and buffer, read over the register link (``--rtl
verilator``: the core compiled by Verilator, for many generations).

    streamscope run examples/life.py --out life.duckdb -- --probes 8 --storage centralized
    streamscope show life.duckdb
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Iterator

import numpy as np
from numpy.typing import NDArray

import streamscope as ss

Bits = NDArray[np.bool_]

#: A traffic light in its 9 x 9 box, one phase: horizontal blinkers above and below the centre,
#: vertical ones left and right. In the other phase each blinker turns a quarter; the whole
#: constellation never leaves its box.
_LIGHT_CELLS = (
    [(1, c) for c in (3, 4, 5)]
    + [(7, c) for c in (3, 4, 5)]
    + [(r, 1) for r in (3, 4, 5)]
    + [(r, 7) for r in (3, 4, 5)]
)
LIGHT_BOX = 9
#: Dead cells kept between two boxes: live cells three apart share no neighbour, so never interact.
_GAP = 2
_ATTEMPTS, _TRIES = 100, 500


def traffic_light() -> Bits:
    """One traffic light in its box (the phase with horizontal blinkers at top and bottom)."""
    box = np.zeros((LIGHT_BOX, LIGHT_BOX), dtype=bool)
    for r, c in _LIGHT_CELLS:
        box[r, c] = True
    return box


def place_lights(width: int, height: int, lights: int, seed: int) -> list[tuple[int, int, int]]:
    """Random, non-overlapping, non-interacting positions: (top row, left column, phase) per
    light. Raises ValueError when ``lights`` do not fit after many tries."""
    if width < LIGHT_BOX or height < LIGHT_BOX:
        raise ValueError(f"a {width}x{height} universe is smaller than one traffic light's box")
    rng = np.random.default_rng(seed)
    span = LIGHT_BOX + _GAP
    best = 0
    # Random sequential placement jams before the universe is full: start afresh a few times.
    for _ in range(_ATTEMPTS):
        placed: list[tuple[int, int, int]] = []
        for _ in range(_TRIES):
            y = int(rng.integers(0, height - LIGHT_BOX + 1))
            x = int(rng.integers(0, width - LIGHT_BOX + 1))
            if all(abs(y - py) >= span or abs(x - px) >= span for py, px, _ in placed):
                placed.append((y, x, int(rng.integers(0, 2))))
                if len(placed) == lights:
                    return placed
        best = max(best, len(placed))
    if lights == 0:
        return []
    raise ValueError(
        f"at most {best} traffic lights fit at random in {width}x{height} (seed {seed}); "
        f"ask for fewer with --lights"
    )


def seed_universe(width: int, height: int, lights: int, seed: int) -> Bits:
    """Generation 0: ``lights`` traffic lights at random (see :func:`place_lights`)."""
    u = np.zeros((height, width), dtype=bool)
    light = traffic_light()
    for y, x, phase in place_lights(width, height, lights, seed):
        u[y : y + LIGHT_BOX, x : x + LIGHT_BOX] |= step(light) if phase else light
    return u


def step(u: Bits) -> Bits:
    """The next generation; cells outside the universe are dead and stay dead."""
    p = np.pad(u, 1).astype(np.uint8)
    h, w = u.shape
    n = sum(p[1 + dy : 1 + dy + h, 1 + dx : 1 + dx + w] for dy in (-1, 0, 1) for dx in (-1, 0, 1))
    n = n - u  # the eight neighbours, without the cell itself
    return (n == 3) | (u & (n == 2))


def bands(width: int, probes: int) -> list[tuple[int, int]]:
    """Column range [lo, hi) watched by each probe: ``width // probes`` columns, the last takes
    the rest."""
    if not 1 <= probes <= width:
        raise ValueError(f"--probes must be between 1 and the width ({width}), got {probes}")
    size = width // probes
    return [(k * size, (k + 1) * size if k < probes - 1 else width) for k in range(probes)]


def band_events(
    prev: Bits, cur: Bits, cols: list[tuple[int, int]]
) -> tuple[Bits, NDArray[np.int64]]:
    """Per row and band: did any cell change from ``prev`` to ``cur`` (the probe's trigger), and
    the new bits of that row segment (column ``lo`` is bit 0; 64 bits at most, as a signed
    64-bit register). Both of shape (height, bands)."""
    changed = prev != cur
    h = cur.shape[0]
    fired = np.zeros((h, len(cols)), dtype=bool)
    values = np.zeros((h, len(cols)), dtype=np.int64)
    for k, (lo, hi) in enumerate(cols):
        fired[:, k] = changed[:, lo:hi].any(axis=1)
        weights = np.left_shift(np.uint64(1), np.arange(hi - lo, dtype=np.uint64))
        values[:, k] = (cur[:, lo:hi].astype(np.uint64) * weights).sum(axis=1).view(np.int64)
    return fired, values


def generations(u: Bits, count: int) -> Iterator[tuple[int, Bits, Bits]]:
    """(g, generation g - 1, generation g) for g = 1 .. count."""
    prev = u
    for g in range(1, count + 1):
        cur = step(prev)
        yield g, prev, cur
        prev = cur


def offers(
    width: int, height: int, lights: int, seed: int, count: int, probes: int
) -> Iterator[tuple[int, list[int]]]:
    """The model's probe events without any monitor: (cycle, probes that sample at it), in
    cycle order, for generations 1 .. count."""
    cols = bands(width, probes)
    for g, prev, cur in generations(seed_universe(width, height, lights, seed), count):
        fired, _ = band_events(prev, cur, cols)
        for r in np.flatnonzero(fired.any(axis=1)).tolist():
            yield g * height + r, np.flatnonzero(fired[r]).tolist()


class Life:
    """The device: one generation per ``height`` cycles, padded to ``gen_ns`` of device time."""

    def __init__(self, universe: Bits, count: int, probes: int, gen_ns: int) -> None:
        self.universe, self.count, self.probes, self.gen_ns = universe, count, probes, gen_ns
        self.cols = bands(universe.shape[1], probes)

    def setup(self) -> None:
        self.handles = [ss.probe(f"region{k}") for k in range(self.probes)]

    def generate(self) -> Iterator[int]:
        height = self.universe.shape[0]
        samplers = [h.sample for h in self.handles]
        watched = any(h.active for h in self.handles)
        for g, prev, cur in generations(self.universe, self.count):
            start = time.monotonic_ns()
            if watched:
                fired, values = band_events(prev, cur, self.cols)
                rows, ks = np.nonzero(fired)  # row-major: cycle order
                base = g * height
                # One call per sample: each is a separate hardware event the probe must offer.
                for r, k, v in zip(
                    rows.tolist(), ks.tolist(), values[rows, ks].tolist(), strict=True
                ):
                    samplers[k](v, cycle=base + r)
            left = start + self.gen_ns - time.monotonic_ns()
            if left > 0:
                time.sleep(left / 1e9)
            yield int(cur.sum())


class Show:
    """The host's view: the population of every generation; a final line at the end."""

    def __init__(self, quiet: bool) -> None:
        self.quiet = quiet
        self.seen = 0
        self.population = 0

    def process(self, population: int) -> None:
        self.seen += 1
        self.population = population

    def teardown(self) -> None:
        if not self.quiet:
            print(f"life: {self.seen} generations, population {self.population}", file=sys.stderr)


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=os.path.basename(__file__), description=__doc__)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--height", type=int, default=40)
    ap.add_argument("--lights", type=int, default=13, help="traffic lights in the universe")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--probes", type=int, default=4, help="probes, one per band of columns")
    ap.add_argument(
        "--storage", default="centralized", choices=("centralized", "distributed"),
        help="one shared buffer with an arbiter, or a buffer per probe",
    )  # fmt: skip
    ap.add_argument("--ports", type=int, default=2, help="central storage writes per cycle")
    ap.add_argument("--hold", type=int, default=1, help="samples a probe holds while it waits")
    ap.add_argument(
        "--capacity", type=int, default=1 << 16,
        help="central storage records between two collections (a power of two)",
    )  # fmt: skip
    ap.add_argument("--generations", type=int, default=2000)
    ap.add_argument("--gen-us", type=float, default=0.0, help="device time per generation")
    ap.add_argument(
        "--rtl", nargs="?", const="amaranth", default="", choices=("amaranth", "verilator"),
        help="an RTL device: the probes' storage is the storage core, simulated by Amaranth "
        "(the default) or by Verilator",
    )  # fmt: skip
    ap.add_argument("--quiet", action="store_true", help="do not print the final line")
    a = ap.parse_args(argv)
    if min(a.width, a.height, a.generations, a.probes, a.ports, a.hold) < 1 or a.lights < 0:
        ap.error("sizes must be positive")
    if a.probes > a.width or a.width - (a.probes - 1) * (a.width // a.probes) > 64:
        ap.error("every band must have 1 to 64 columns (a 64-bit sample register)")
    try:
        a.universe = seed_universe(a.width, a.height, a.lights, a.seed)
    except ValueError as exc:
        ap.error(str(exc))
    return a


def pipeline(argv: list[str]) -> ss.Pipeline:
    a = _args(argv)
    universe = a.universe
    fpga = ss.EmulatedDevice("fpga", bulk_size=16, transfer_us=200, latency_us=20, rtl=a.rtl)
    p = ss.Pipeline(f"life-{a.probes}-{a.storage}")
    p.add("life", Life(universe, a.generations, a.probes, int(a.gen_us * 1e3)), resource=fpga)
    p.add("show", Show(a.quiet))
    p.connect("life", "show", capacity=64)
    for k in range(a.probes):
        p.probe("life", f"region{k}", "sampler", storage=a.storage)
    p.probe_storage(fpga, ports=a.ports, capacity=a.capacity, hold=a.hold)
    return p


def queries(frame: str = "1s") -> list[str]:
    """Every region probe's samples, counted per frame (a query is what switches probes on)."""
    return [f"sample(life.region*): count every {frame}"]


QUERIES = queries()
