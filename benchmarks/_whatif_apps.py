"""Pipelines for the what-if benchmark (``bench_whatif.py``), one per ``--shape``; each keeps
its own truth with ``--stamps DIR``: ``DIR/source.npy``, when each item's put was done (the
source's generator resumed), on the host's monotonic clock.

- ``tandem3``: ``src -> a -> b -> c``, each stage sleeping an exponential time (I/O-like: the
  interpreter lock is free meanwhile), means ``--a-ms``, ``--b-ms``, ``--c-ms``; capacity 4.
- ``blocking``: ``src -> a -> b``, exponential sleeps of ``--ms`` (1 ms) each, ``a -> b`` of ``--cap``.
- ``gil``: ``src -> parse0..parseN-1 -> sink`` (``--replicas N``, dealt round-robin), each parse
  a pure-Python loop of ``--turns`` (it holds the interpreter lock throughout).
- ``procs``: the same with ``work0..workN-1``, each in a process of its own.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import streamscope as ss

QUERIES: list[
    str
] = []  # the defaults: every channel's occupancy and throughput, every stage's state


class Source:
    """``items`` integers as fast as they are taken; with ``stamps``, when each put was done."""

    def __init__(self, items: int, stamps: str | None) -> None:
        self.items, self.stamps = items, stamps

    def generate(self):  # type: ignore[no-untyped-def]
        done = np.zeros(self.items, dtype=np.int64)
        for i in range(self.items):
            yield i
            done[i] = time.monotonic_ns()  # resumed: item i's put is done
        if self.stamps is not None:
            np.save(os.path.join(self.stamps, "source.npy"), done)


class Sleeper:
    """An exponential sleep of mean ``mean_ms`` per item (its own random stream)."""

    def __init__(self, mean_ms: float, seed: int) -> None:
        self.mean_s = mean_ms / 1e3
        self.rng = np.random.default_rng(seed)

    def process(self, item: int) -> int:
        time.sleep(self.rng.exponential(self.mean_s))
        return item


class Spinner:
    """A pure-Python loop of ``n`` turns per item (the same work in every run: the benchmark
    finds once how many turns take the time it wants, ``spin_turns``)."""

    def __init__(self, n: int) -> None:
        self.n = n

    def process(self, item: int) -> int:
        _spin(self.n)
        return item


def _spin(n: int) -> int:
    x = 0
    for i in range(n):
        x += i * i
    return x


def spin_turns(ms: float) -> int:
    """Turns of ``_spin`` that take about ``ms`` here (the fastest of a few tries)."""
    best = min(_timed(20_000) for _ in range(7))
    return max(1, int(ms / 1e3 / best))


def _timed(n: int) -> float:
    t = time.perf_counter()
    _spin(n)
    return (time.perf_counter() - t) / n


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="_whatif_apps.py", description=__doc__)
    ap.add_argument("--shape", choices=("tandem3", "blocking", "gil", "procs"), required=True)
    ap.add_argument("--items", type=int, default=1000)
    ap.add_argument("--a-ms", type=float, default=1.0)
    ap.add_argument("--b-ms", type=float, default=2.0)
    ap.add_argument("--c-ms", type=float, default=1.5)
    ap.add_argument("--cap", type=int, default=1)
    ap.add_argument("--ms", type=float, default=1.0, help="blocking: each stage's mean ms")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--turns", type=int, default=20_000, help="turns of the loop per item")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--stamps", help="a folder: keep the source's own times there")
    return ap.parse_args(argv)


def pipeline(argv: list[str]) -> ss.Pipeline:
    a = _args(argv)
    p = ss.Pipeline(f"whatif-{a.shape}")
    p.add("src", Source(a.items, a.stamps))
    if a.shape == "tandem3":
        for i, (name, ms) in enumerate((("a", a.a_ms), ("b", a.b_ms), ("c", a.c_ms))):
            p.add(name, Sleeper(ms, a.seed + i))
        p.chain("src", "a", "b", "c", capacity=4)
    elif a.shape == "blocking":
        p.add("a", Sleeper(a.ms, a.seed))
        p.add("b", Sleeper(a.ms, a.seed + 1))
        p.connect("src", "a", capacity=4)
        p.connect("a", "b", capacity=a.cap)
    else:
        stem = "parse" if a.shape == "gil" else "work"
        p.add("sink", lambda item: None)
        for i in range(a.replicas):
            name = f"{stem}{i}"
            where = ss.Process(f"p{i}") if a.shape == "procs" else "thread"
            p.add(name, Spinner(a.turns), resource=where)
            p.connect("src", name, capacity=4)
            p.connect(name, "sink", capacity=4)
    return p
