"""A pipeline over three hosts: a source on ``node-a``, a parallel group of workers on ``node-b``,
their items gathered and stored on ``node-c``, every host with a clock of its own that the
monitor is not told.

streamscope run examples/hosts.py -- --items 2000 --truth truth.npz

streamscope starts a Ray cluster on this machine, one node per host, bound to loopback (or uses
the one at ``--ray-address``), and stops it when the run ends. Each host's agent reduces the
buffers at its ends of the links between hosts; the network between them is a virtual queue.

The application keeps its own truth (``--truth FILE.npz``): for every item, the host monotonic
time its source made it, the time a worker took it, the worker, the time it was gathered, the
time the sink got it and the time the sink was done with it; and beside that file
(``FILE.source.npy``, ``FILE.work0.npy``, ..., ``FILE.gather.npy``) when each stage that puts had
handed each item on (its code resumed after the put): every put lies between a stage's two
stamps, every get between the end of the stage's previous item and its first stamp, whatever
holds a thread back between them. On one machine every host's monotonic clock is the same one,
so these times are comparable; the monitor sees only the hosts' emulated clocks.
"""

from __future__ import annotations

import argparse
import os
import signal
import time
from pathlib import Path

import numpy as np

import streamscope as ss

#: The hosts' clocks (rate error, offset, drift): what the monitor must find by round trips.
CLOCKS = {
    "node-a": "rate_ppm=60,offset_s=4.5,drift_ppb_s=20",
    "node-b": "rate_ppm=-45,offset_s=-7.25",
    "node-c": "rate_ppm=25,offset_s=1.5,drift_ppb_s=-10",
}

QUERIES = [
    "occupancy(source -> work0): mean, max, histogram every 500ms",
    "occupancy(gather -> sink): mean, max, histogram every 500ms",
    "throughput(* -> *) every 500ms",
    "latency(source -> *): mean, box every 500ms",
    "state(*) every 500ms",
]


class Source:
    """Items at exponential gaps (an i.i.d. source), each carrying when it was made; with
    ``stamps`` (a file), when each was handed on noted there (its generator resumed: the put
    was done)."""

    def __init__(
        self, items: int, mean_gap_ns: float, seed: int, stamps: str | None = None
    ) -> None:
        self.gaps = np.random.default_rng(seed).exponential(mean_gap_ns, items).astype(np.int64)
        self.stamps = stamps

    def generate(self):  # type: ignore[no-untyped-def]
        handed = np.zeros(len(self.gaps), dtype=np.int64)
        due = time.monotonic_ns()
        for k, gap in enumerate(self.gaps):
            due += int(gap)
            while (left := due - time.monotonic_ns()) > 0:
                time.sleep(left / 1e9)
            yield (k, time.monotonic_ns())
            handed[k] = time.monotonic_ns()
        if self.stamps:
            np.save(self.stamps, handed)


class Worker:
    """Takes ``service_ms`` of work per item; stamps when it took the item, and with
    ``stamps`` (a file) when it had handed it on (item, time) there. ``kill_at``: at that
    item, kill the node it runs on (its node's manager, the parent of the process it runs in),
    as a host that dies mid-run."""

    def __init__(
        self, index: int, service_ns: float, seed: int, kill_at: int = 0, stamps: str | None = None
    ) -> None:
        self.index = index
        self.rng = np.random.default_rng(seed + 1000 * (index + 1))
        self.mean = service_ns
        self.kill_at = kill_at
        self.stamps = stamps
        self.handed: list[tuple[int, int]] = []

    def process(self, item: tuple[int, int]):  # type: ignore[no-untyped-def]
        took = time.monotonic_ns()
        if self.kill_at and item[0] >= self.kill_at:
            os.kill(os.getppid(), signal.SIGKILL)
        end = took + int(self.rng.exponential(self.mean))
        while (left := end - time.monotonic_ns()) > 0:
            time.sleep(left / 1e9)
        yield (item[0], item[1], took, self.index)
        self.handed.append((item[0], time.monotonic_ns()))  # resumed: the put was done

    def teardown(self) -> None:
        _save(self.stamps, self.handed)


class Gather:
    """On node-c: the workers' items into one stream, each stamped as it goes on, and with
    ``stamps`` (a file) when it had gone on (item, time) there."""

    def __init__(self, stamps: str | None = None) -> None:
        self.stamps = stamps
        self.handed: list[tuple[int, int]] = []

    def process(self, item: tuple[int, int, int, int]):  # type: ignore[no-untyped-def]
        yield (*item, time.monotonic_ns())
        self.handed.append((item[0], time.monotonic_ns()))  # resumed: the put was done

    def teardown(self) -> None:
        _save(self.stamps, self.handed)


def _save(path: str | None, rows: list[tuple[int, int]]) -> None:
    if path:
        np.save(path, np.array(rows, dtype=np.int64).reshape(-1, 2))


class Sink:
    """On node-c, after ``gather``: 1 ms per item; keeps every item's times (when it took it,
    and when it was done with it) and writes them to ``path`` when the stream ends."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.rows: list[tuple[int, ...]] = []

    def process(self, item: tuple[int, int, int, int, int]) -> None:
        got = time.monotonic_ns()
        while (left := got + 1_000_000 - time.monotonic_ns()) > 0:
            time.sleep(left / 1e9)
        self.rows.append((*item, got, time.monotonic_ns()))

    def teardown(self) -> None:
        if self.path:
            rows = np.array(self.rows, dtype=np.int64).reshape(-1, 7)
            np.savez(self.path, item=rows[:, 0], made_ns=rows[:, 1], taken_ns=rows[:, 2],
                     worker=rows[:, 3], gathered_ns=rows[:, 4], got_ns=rows[:, 5],
                     done_ns=rows[:, 6])  # fmt: skip


def stamps(truth: str | None, stage: str) -> str | None:
    """Where ``stage`` notes when it handed each item on, beside the sink's ``truth`` file."""
    return str(Path(truth).with_suffix(f".{stage}.npy")) if truth else None


def pipeline(argv: list[str]) -> ss.Pipeline:
    ap = argparse.ArgumentParser(prog="hosts.py", description=__doc__)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=200.0, help="items per second")
    ap.add_argument("--workers", type=int, default=2, help="workers on node-b")
    ap.add_argument("--service-ms", type=float, default=2.0, help="mean work per item")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--latency-ms", type=float, default=5.0, help="each link's latency")
    ap.add_argument("--truth", default=None, help="where the sink writes the items' times")
    ap.add_argument("--kill-at", type=int, default=0, help="kill node-b at this item")
    a = ap.parse_args(argv)
    hosts = {h: ss.Host(h, clock=c, latency_us=a.latency_ms * 1e3) for h, c in CLOCKS.items()}
    p = ss.Pipeline("hosts")
    p.add("source", Source(a.items, 1e9 / a.rate, a.seed, stamps(a.truth, "source")),
          resource=hosts["node-a"])  # fmt: skip
    p.add("gather", Gather(stamps(a.truth, "gather")), resource=hosts["node-c"])
    p.add("sink", Sink(a.truth), resource=hosts["node-c"])
    p.connect("gather", "sink", capacity=8)  # both ends on node-c: no network
    for i in range(a.workers):
        worker = Worker(i, a.service_ms * 1e6, a.seed, a.kill_at, stamps(a.truth, f"work{i}"))
        p.add(f"work{i}", worker, resource=hosts["node-b"])
        p.connect("source", f"work{i}", capacity=64)
        p.connect(f"work{i}", "gather", capacity=64)
    return p
