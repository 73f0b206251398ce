"""A monitored ``streamscope.Queue`` put+get against a bare ``queue.Queue`` put+get (target:
<= 1.10x), the framework's channel with nothing monitored (target: <= 1.0x), and a program's
own ``queue.Queue`` watched as ``streamscope run`` watches it (``ss.watch``, default queries:
its ends and its threads' states recorded where two threads' stages use it; one thread's own
queue is no channel).

In: nothing (synthetic integers). Out: ns per put+get pair for a bare ``queue.Queue``, the
framework's ``ThreadChannel`` without taps, and a drop-in ``streamscope.Queue`` inside a
``streamscope.monitor`` session whose queries watch the queue's occupancy and both stages'
states (its records go into rings a monitor process drains), single-threaded and
producer/consumer, and each one's ratio to the bare queue. The monitored variant times the
puts and gets only: the session's start and end are ``bench_startup.py``'s subject.

    python benchmarks/bench_putget.py [--quick] [--reps N]
"""

from __future__ import annotations

import queue
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import streamscope as ss
from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.pipeline.program.dropin import REGISTRY

TARGET_MONITORED = 1.10
TARGET_CHANNEL = 1.0
CAPACITY = 64
QUERIES = ["occupancy(producer -> consumer): mean, max", "state(*): duty"]


def _single(q: Any, n: int) -> None:
    put, get = q.put, q.get
    with ss.stage("producer"):
        for i in range(n):
            put(i)
            get()


def _threaded(q: Any, n: int) -> None:
    def produce() -> None:
        put = q.put
        with ss.stage("producer"):
            for i in range(n):
                put(i)

    def consume() -> None:
        get = q.get
        with ss.stage("consumer"):
            for _ in range(n):
                get()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _per_pair(fn: Callable[[], None], n: int) -> tuple[float, float]:
    """(wall ns, CPU ns) per pair. CPU time is the whole process's, every thread included."""
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    fn()
    t1, c1 = time.perf_counter_ns(), time.process_time_ns()
    return (t1 - t0) / n, (c1 - c0) / n


Body = Callable[[Any, int], None]
drops: dict[str, int] = {}


def variants(
    run: Body, n: int, label: str, tmp: Path
) -> list[tuple[str, Callable[[], tuple[float, ...]]]]:
    def bare() -> tuple[float, ...]:
        q: queue.Queue[Any] = queue.Queue(CAPACITY)
        return _per_pair(lambda: run(q, n), n)

    def channel() -> tuple[float, ...]:
        ch = ThreadChannel(CAPACITY, name="bench")
        return _per_pair(lambda: run(ch, n), n)

    def monitored() -> tuple[float, ...]:
        REGISTRY.queues.clear()
        q = ss.Queue(CAPACITY, src="producer", dst="consumer")
        out = tmp / f"{label}-{time.monotonic_ns()}.duckdb"
        opts = ss.RunOptions(out=out, mode="process", frame_ns=100_000_000)
        with ss.monitor(QUERIES, opts) as m:
            figures = _per_pair(lambda: run(q, n), n)
        if m.result is None or m.result.status != "completed":
            raise RuntimeError(f"the monitored session did not complete: {m.result}")
        with ss.load(out) as r:
            recorded = sum(d.recorded for d in r.drops())
            refused = sum(d.dropped for d in r.drops())
        if recorded + refused < 2 * n:
            raise RuntimeError(f"the taps accounted for {recorded + refused} of {2 * n} events")
        drops[label] = drops.get(label, 0) + refused
        out.unlink()
        return figures

    def watched() -> tuple[float, ...]:
        out = tmp / f"{label}-w-{time.monotonic_ns()}.duckdb"
        opts = ss.RunOptions(out=out, mode="process", frame_ns=100_000_000)
        with ss.watch([], opts) as m:
            q = queue.Queue(CAPACITY)  # the program's own, as ``streamscope run`` watches it
            figures = _per_pair(lambda: run(q, n), n)
        if m.result is None or m.result.status != "completed":
            raise RuntimeError(f"the watched session did not complete: {m.result}")
        out.unlink()
        return figures

    return [
        ("queue.Queue (bare)", bare),
        ("ThreadChannel, no taps", channel),
        ("ss.Queue, monitored", monitored),
        ("queue.Queue, watched", watched),
    ]


def report(title: str, by_metric: list[list[Summary]]) -> list[list[Summary]]:
    rows = []
    for metric, results in zip(("wall", "CPU"), by_metric, strict=True):
        bare = results[0]
        for s in results:
            r = paired_ratios(s, bare)
            rows.append(
                [s.name, metric, f"{s.median:,.0f}", fmt_spread(s), f"{s.best:,.0f}",
                 f"{r.median:.2f}x", f"{r.best:.2f}..{max(r.samples):.2f}"]
            )  # fmt: skip
    print(f"\n{title}")
    print(table(["variant", "clock", "ns/pair", "spread", "best", "vs bare", "range"], rows))
    return by_metric


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    quick = args.quick
    reps = args.reps or (3 if quick else 11)
    n1 = 30_000 if quick else 300_000
    n2 = 20_000 if quick else 200_000
    print(machine())
    print(f"{reps} interleaved repetitions; channel capacity {CAPACITY}; queries: {QUERIES}")
    with tempfile.TemporaryDirectory(prefix="bench-putget-") as d:
        tmp = Path(d)
        single = report(
            f"single thread: put then get, {n1:,} pairs per repetition",
            interleave(variants(_single, n1, "single", tmp), reps, metrics=2),
        )
        threaded = report(
            f"producer + consumer threads: {n2:,} items per repetition",
            interleave(variants(_threaded, n2, "threaded", tmp), reps, metrics=2),
        )
    for label, dropped in drops.items():
        if dropped:
            print(f"note: {label}: {dropped:,} records refused by full rings (counted)")
    print(
        f"\ntargets: monitored ss.Queue <= {TARGET_MONITORED}x bare; ThreadChannel <= {TARGET_CHANNEL}x bare"
    )
    for name, by_metric in (("single thread", single), ("producer/consumer", threaded)):
        wall = by_metric[0]
        mon = paired_ratios(wall[2], wall[0]).median
        ch = paired_ratios(wall[1], wall[0]).median
        watched = paired_ratios(wall[3], wall[0]).median
        print(
            f"  {name}: monitored {mon:.2f}x wall ({'meets' if mon <= TARGET_MONITORED else 'misses'}), "
            f"ThreadChannel {ch:.2f}x wall ({'meets' if ch <= TARGET_CHANNEL else 'misses'}); "
            f"the program's queue.Queue watched {watched:.2f}x wall"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
