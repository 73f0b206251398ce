"""M/M/1 micro-benchmark (Lancaster et al. 2011, Figs. 2-3): source -> server -> sink.

The source inserts items with exponential inter-insertion times, the server removes them and
holds each for an exponential (``--service const``: constant) service time. The application
records the true insertion and removal time of every item itself, so a trace-driven replay gives
the ground-truth occupancy of ``source -> server`` independently of streamscope (``--truth DIR``):
``inserted.npy`` (the source resumed: its put was done), ``due.npy`` (the put began after it),
``removed.npy`` (the server's first act on the item) and ``served.npy`` (its time on it, after
which it asked for the next).

    streamscope run examples/mm1.py -q 'occupancy(source -> server): mean, histogram' -- --rho 0.8
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np

import streamscope as ss

QUERIES = [
    "occupancy(source -> server): mean, max, histogram every 1s",
    "throughput(server -> sink): mean every 1s",
    "state(server): duty every 1s",
]

#: Sleep this much less than asked, then spin: keeps service and arrival times exact to ~µs.
_SPIN_NS = 100_000


def sleep_until(deadline_ns: int) -> None:
    remaining = deadline_ns - time.monotonic_ns()
    if remaining > _SPIN_NS:
        time.sleep((remaining - _SPIN_NS) / 1e9)
    while time.monotonic_ns() < deadline_ns:
        pass


class Source:
    """Poisson arrivals; a blocked insertion restarts the clock (so the system is M/M/1/(C+2))."""

    def __init__(self, items: int, mean_gap_ns: float, seed: int, truth: Path | None) -> None:
        self.items = items
        self.mean_gap_ns = mean_gap_ns
        self.seed = seed
        self.truth = truth

    def generate(self):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(self.seed)
        gaps = rng.exponential(self.mean_gap_ns, self.items).astype(np.int64)
        inserted = np.zeros(self.items, dtype=np.int64)
        due = np.zeros(self.items, dtype=np.int64)
        deadline = time.monotonic_ns()
        for k in range(self.items):
            deadline += int(gaps[k])
            sleep_until(deadline)
            due[k] = deadline  # the insertion began after this
            yield k
            # The runner resumes us right after the insertion completed: that is its true time.
            now = time.monotonic_ns()
            inserted[k] = now
            if now - deadline > 200_000:  # blocked on a full channel: the next gap starts now
                deadline = now
        if self.truth is not None:
            np.save(self.truth / "inserted.npy", inserted)
            np.save(self.truth / "due.npy", due)


class Server:
    def __init__(
        self, items: int, mean_service_ns: float, seed: int, dist: str, truth: Path | None
    ) -> None:
        self.items = items
        self.mean = mean_service_ns
        self.seed = seed
        self.dist = dist
        self.truth = truth
        self.k = 0

    def setup(self) -> None:
        rng = np.random.default_rng(self.seed + 1)
        if self.dist == "exp":
            self.service = rng.exponential(self.mean, self.items).astype(np.int64)
        else:
            self.service = np.full(self.items, int(self.mean), dtype=np.int64)
        self.removed = np.zeros(self.items, dtype=np.int64)
        self.served = np.zeros(self.items, dtype=np.int64)

    def process(self, item: int) -> int:
        start = time.monotonic_ns()  # called right after the removal
        k = self.k
        self.removed[k] = start
        sleep_until(start + int(self.service[k]))
        self.served[k] = time.monotonic_ns() - start
        self.k = k + 1
        return item

    def teardown(self) -> None:
        if self.truth is not None:
            np.save(self.truth / "removed.npy", self.removed[: self.k])
            np.save(self.truth / "served.npy", self.served[: self.k])


def build(argv: list[str], default_service: str = "exp") -> ss.Pipeline:
    ap = argparse.ArgumentParser(prog=os.path.basename(__file__), description=__doc__)
    ap.add_argument("--rho", type=float, default=0.8, help="utilisation lambda/mu (default 0.8)")
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--capacity", type=int, default=1024, help="capacity of source -> server")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--service-ms", type=float, default=1.0, help="mean service time (ms)")
    ap.add_argument("--service", choices=("exp", "const"), default=default_service)
    ap.add_argument("--source-resource", choices=("thread", "process"), default="thread")
    ap.add_argument("--server-resource", choices=("thread", "process"), default="thread")
    ap.add_argument(
        "--truth", type=Path, help="directory for the ground-truth insertion/removal times"
    )
    a = ap.parse_args(argv)
    if not a.rho > 0:
        ap.error("--rho must be positive")
    if a.truth is not None:
        a.truth.mkdir(parents=True, exist_ok=True)
    mean_service = a.service_ms * 1e6
    p = ss.Pipeline("mm1" if a.service == "exp" else "md1")
    p.add(
        "source", Source(a.items, mean_service / a.rho, a.seed, a.truth), resource=a.source_resource
    )
    p.add(
        "server",
        Server(a.items, mean_service, a.seed, a.service, a.truth),
        resource=a.server_resource,
    )
    p.add("sink", lambda item: None)
    p.connect("source", "server", capacity=a.capacity)
    p.connect("server", "sink", capacity=a.capacity)
    return p


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv)
