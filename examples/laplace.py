"""Monte Carlo solver of Laplace's equation (Lancaster et al. 2011, §IV, Fig. 17), monitored.

    prng -> split -> walk0..walk7 -> avg -> print

``prng`` makes blocks of random numbers; ``split`` deals them out to the ``walk`` stages; each
walk stage keeps a set of random walkers moving on the grid (one step per random number) from
the points of interest until they reach the boundary, where they score the boundary value; ``avg``
accumulates the scores per point and now and then sends the current solution to ``print``, on the
host. Every stage but ``print`` runs on an emulated device (an FPGA in the seed), so the channel
``avg -> print`` crosses a bulk-transfer bus: a virtual queue.

The walk stages model hardware: each block takes ``--block-us`` of device time (the numpy work
that really computes the walks is much shorter and is padded to it), so walk stages run in
parallel as hardware units would, and 16 of them do twice the work of 8.

    streamscope run examples/laplace.py --report laplace.html -- --walks 8 --blocks 40000

With ``--rtl`` the device is an RTL device: the device's side of ``avg -> print`` is reduced per
frame by the channel monitor core (Lancaster et al.'s (2011) FPGA agent), simulated cycle by cycle, fed the
buffer's insertions and removals and ``avg``'s blocking, and read over the register link, and
calibration reads the timestamp core (``--rtl verilator``: both compiled by Verilator).

With ``--stamps DIR`` the application keeps its own truth of ``latency(prng ~> print)``, each
instant between two of its own stamps: each block goes out numbered, ``prng`` notes the time
before it hands a block on and when it is resumed (the block's put was done), the number
travels through ``split`` and its walk, ``avg`` sends on the number of the first block it took
since its last update and notes the time before it does, and ``print`` notes when each update
came (after its take). The host's monotonic clock throughout (every stage is a process of this
machine, whatever clock the device is said to have): ``DIR/prng.npy`` (number, time put,
time before), ``DIR/avg.npy`` (number, time before) and ``DIR/print.npy`` (number, time).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import streamscope as ss

# Many walk stages share one interpreter on the emulated device: hand the interpreter lock over
# every 0.2 ms rather than every 5 ms, so a unit whose block time is up gets to run promptly.
sys.setswitchinterval(0.0002)

#: Moves for the random numbers 0..3: right, left, up, down.
_DX = np.array([1, -1, 0, 0], dtype=np.int64)
_DY = np.array([0, 0, 1, -1], dtype=np.int64)


def boundary_value(kind: str, n: int, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Boundary values on the n x n grid (coordinates 0..n-1). ``linear``: u = x / (n-1), whose
    exact solution inside is the same plane; ``hot-top``: 100 on the top edge, 0 elsewhere."""
    if kind == "linear":
        return x / (n - 1)
    return np.where(y == n - 1, 100.0, 0.0)


def points_of_interest(n: int, k: int) -> np.ndarray:
    """A k x k lattice of interior points, spread over the grid: shape (k*k, 2)."""
    coords = np.unique(np.linspace(1, n - 2, k).round().astype(np.int64))
    gx, gy = np.meshgrid(coords, coords, indexing="ij")
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


class Prng:
    """Blocks of random numbers 0..3 (one per walk step); with ``stamps`` (a folder), each as
    (its number, the block), and when each was handed on noted there."""

    def __init__(self, blocks: int, block: int, seed: int, stamps: str | None = None) -> None:
        self.blocks, self.block, self.seed, self.stamps = blocks, block, seed, stamps

    def generate(self):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(self.seed)
        if self.stamps is None:
            for _ in range(self.blocks):
                yield rng.integers(0, 4, self.block, dtype=np.uint8)
            return
        handed = np.zeros((self.blocks, 3), dtype=np.int64)
        for i in range(self.blocks):
            block = rng.integers(0, 4, self.block, dtype=np.uint8)
            before = time.monotonic_ns()  # block i is not put yet
            yield i, block
            handed[i] = i, time.monotonic_ns(), before  # resumed: block i's put is done
        np.save(os.path.join(self.stamps, "prng.npy"), handed)


class Walk:
    """``walkers`` random walkers; walker k walks from point k mod P, restarting there each
    time it reaches the boundary. A block moves every walker ``len(block) // walkers`` steps.
    Out: per block, (sum of boundary values scored, walks finished) per point: shape (2, P)."""

    def __init__(
        self, n: int, points: np.ndarray, walkers: int, boundary: str, block_ns: int
    ) -> None:
        self.n, self.points, self.walkers = n, points, walkers
        self.boundary, self.block_ns = boundary, block_ns
        self.home = np.arange(walkers) % len(points)
        self.x = points[self.home, 0].copy()
        self.y = points[self.home, 1].copy()

    def process(self, block: np.ndarray | tuple[int, np.ndarray]) -> object:
        if isinstance(block, tuple):  # ``--stamps``: the block's number goes on with its score
            return block[0], self._walk(block[1])
        return self._walk(block)

    def _walk(self, block: np.ndarray) -> np.ndarray:
        start = time.monotonic_ns()
        k, n = self.walkers, self.n
        steps = len(block) // k
        d = block[: steps * k].reshape(steps, k)
        px = self.x + np.cumsum(_DX[d], axis=0)
        py = self.y + np.cumsum(_DY[d], axis=0)
        out = (px <= 0) | (px >= n - 1) | (py <= 0) | (py >= n - 1)
        done = out.any(axis=0)
        first = out.argmax(axis=0)
        cols = np.arange(k)
        hx, hy = px[first, cols], py[first, cols]
        score = np.zeros((2, len(self.points)))
        fin = np.flatnonzero(done)
        np.add.at(score[0], self.home[fin], boundary_value(self.boundary, n, hx[fin], hy[fin]))
        np.add.at(score[1], self.home[fin], 1.0)
        # Finished walkers start again from their point; the others carry on from where they are.
        self.x = np.where(done, self.points[self.home, 0], px[-1])
        self.y = np.where(done, self.points[self.home, 1], py[-1])
        # The hardware unit's time for one block (a plain sleep: no spinning that would hold the
        # interpreter lock the other units' threads need).
        left = start + self.block_ns - time.monotonic_ns()
        if left > 0:
            time.sleep(left / 1e9)
        return score


class Avg:
    """Accumulates the walk scores; every ``every`` blocks, the current solution goes out."""

    def __init__(self, points: int, every: int, stamps: str | None = None) -> None:
        self.sums = np.zeros(points)
        self.counts = np.zeros(points)
        self.every, self.seen, self.stamps = every, 0, stamps
        self.first: int | None = None  # ``--stamps``: the first block taken since the last update
        self.sent: list[tuple[int, int]] = []  # ``--stamps``: (that number, time before its put)

    def process(self, score: np.ndarray | tuple[int, np.ndarray]):  # type: ignore[no-untyped-def]
        if isinstance(score, tuple):
            number, score = score
            self.first = number if self.first is None else self.first
        self.sums += score[0]
        self.counts += score[1]
        self.seen += 1
        if self.seen % self.every == 0:
            first, self.first = self.first, None
            if first is None:
                yield self.estimate()
                return
            update = (first, self.estimate())
            self.sent.append((first, time.monotonic_ns()))
            yield update

    def estimate(self) -> np.ndarray:
        """Row 0: the estimates; row 1: walks per point."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.stack([self.sums / self.counts, self.counts])

    def teardown(self) -> None:
        if self.stamps is not None:
            sent = np.array(self.sent, dtype=np.int64).reshape(-1, 2)
            np.save(os.path.join(self.stamps, "avg.npy"), sent)


class Print:
    """Keeps the latest solution and prints it at the end (and saves it with ``--save``)."""

    def __init__(
        self, points: np.ndarray, save: str | None, quiet: bool, stamps: str | None = None
    ) -> None:
        self.points, self.save, self.quiet, self.stamps = points, save, quiet, stamps
        self.latest: np.ndarray | None = None
        self.updates = 0
        self.came: list[tuple[int, int]] = []  # ``--stamps``: (first block's number, time)

    def process(self, est: np.ndarray | tuple[int, np.ndarray]) -> None:
        if isinstance(est, tuple):
            self.came.append((est[0], time.monotonic_ns()))
            est = est[1]
        self.latest = est
        self.updates += 1

    def teardown(self) -> None:
        if self.stamps is not None:
            came = np.array(self.came, dtype=np.int64).reshape(-1, 2)
            np.save(os.path.join(self.stamps, "print.npy"), came)
        if self.latest is None:
            return
        if self.save:
            np.save(self.save, np.vstack([self.points.T.astype(np.float64), self.latest]))
        if not self.quiet:
            cells = ", ".join(
                f"u({x},{y})={v:.2f}"
                for (x, y), v in zip(self.points.tolist(), self.latest[0].tolist(), strict=True)
            )
            print(f"laplace: {self.updates} updates, {int(self.latest[1].sum())} walks: {cells}",
                  file=sys.stderr)  # fmt: skip


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=os.path.basename(__file__), description=__doc__)
    ap.add_argument("--walks", type=int, default=8, help="number of walk stages (seed: 8)")
    ap.add_argument("--blocks", type=int, default=40_000, help="random-number blocks to use")
    ap.add_argument("--block", type=int, default=8192, help="random numbers per block")
    ap.add_argument("--walkers", type=int, default=64, help="walkers per walk stage")
    ap.add_argument("--block-us", type=float, default=8000.0, help="device time per block")
    ap.add_argument("--grid", type=int, default=12, help="grid size n (n x n points)")
    ap.add_argument("--points", type=int, default=3, help="k: a k x k lattice of points")
    ap.add_argument("--boundary", choices=("hot-top", "linear"), default="hot-top")
    ap.add_argument("--capacity", type=int, default=128, help="capacity of prng -> split")
    ap.add_argument("--every", type=int, default=4000, help="blocks between two updates")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--save", help="write the final solution to this .npy file")
    ap.add_argument("--quiet", action="store_true", help="do not print the solution")
    ap.add_argument("--stamps", help="a folder: keep the blocks' own times from prng to print")
    ap.add_argument(
        "--rtl", nargs="?", const="amaranth", default="", choices=("amaranth", "verilator"),
        help="an RTL device: its sub-queue reduced by the channel monitor core, simulated by "
        "Amaranth (the default) or by Verilator",
    )  # fmt: skip
    a = ap.parse_args(argv)
    if min(a.walks, a.blocks, a.block, a.walkers, a.points, a.every) < 1 or a.grid < 4:
        ap.error("sizes must be positive (and --grid at least 4)")
    return a


def pipeline(argv: list[str]) -> ss.Pipeline:
    a = _args(argv)
    pts = points_of_interest(a.grid, a.points)
    fpga = ss.EmulatedDevice("fpga", bulk_size=16, transfer_us=200, latency_us=20, rtl=a.rtl)
    p = ss.Pipeline(f"laplace-{a.walks}")
    p.add("prng", Prng(a.blocks, a.block, a.seed, a.stamps), resource=fpga)
    p.add("split", lambda block: block, resource=fpga)
    p.connect("prng", "split", capacity=a.capacity)
    walks = [f"walk{i}" for i in range(a.walks)]
    for w in walks:
        p.add(w, Walk(a.grid, pts, a.walkers, a.boundary, int(a.block_us * 1e3)), resource=fpga)
        p.connect("split", w, capacity=4)
    p.add("avg", Avg(len(pts), a.every, a.stamps), resource=fpga)
    for w in walks:
        p.connect(w, "avg", capacity=4)
    p.add("print", Print(pts, a.save, a.quiet, a.stamps))
    p.connect("avg", "print", capacity=64)
    return p


def queries(frame: str = "1s") -> list[str]:
    """What the seed asked, and what shows where the time goes: every walk stage, however many
    ``--walks`` made (``walk*`` matches the stages the pipeline has)."""
    return [
        f"occupancy(prng -> split): mean, max every {frame}",
        f"occupancy(avg -> print): mean, max every {frame}",
        f"throughput(prng -> split): mean every {frame}",
        *(f"state({s}): duty every {frame}" for s in ("prng", "split", "walk*", "avg")),
    ]


QUERIES = queries()
