"""Cost of a monitored put+get against a bare ``queue.Queue`` put+get, in one process.

In: nothing (synthetic integers). Out: a table of ns per put+get pair for a bare ``queue.Queue``,
a ``ThreadChannel`` without taps and a ``ThreadChannel`` with both taps flushed by a running
``Agent``, single-threaded and producer/consumer, and each one's ratio to the bare queue.

    python benchmarks/bench_putget.py [--quick] [--reps N]
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from _harness import Summary, fmt_spread, interleave, machine, paired_ratios, parse_args, table
from streamscope.core.records import Kind
from streamscope.pipeline.channel import ThreadChannel
from streamscope.probes.agent import Agent
from streamscope.probes.taps import LockedTap
from streamscope.transport.channels import InMemoryTransport

TARGET_RATIO = 1.2
CAPACITY = 64


class Monitored:
    """A tapped channel whose agent flushes every 50 ms to a queue that a thread empties, as an
    inline monitor would: the cost of flushing and of handing the bytes over is included."""

    def __init__(self) -> None:
        self.channel = ThreadChannel(CAPACITY, name="bench")
        self.channel.tail = LockedTap(1, Kind.PUT, self.channel.mutex)
        self.channel.head = LockedTap(2, Kind.GET, self.channel.mutex)
        self.inbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self.agent = Agent(0, InMemoryTransport(self.inbox))
        self.agent.add(self.channel.tail)
        self.agent.add(self.channel.head)
        self.received = 0
        self._drainer = threading.Thread(target=self._drain, name="bench-drain", daemon=True)

    def _drain(self) -> None:
        while (data := self.inbox.get()) is not None:
            self.received += len(data)

    def __enter__(self) -> ThreadChannel:
        self._drainer.start()
        self.agent.start()
        return self.channel

    def __exit__(self, *exc: object) -> None:
        self.agent.close()
        self._drainer.join()


def _single(q: queue.Queue[Any], n: int) -> None:
    put, get = q.put, q.get
    for i in range(n):
        put(i)
        get()


def _threaded(q: queue.Queue[Any], n: int) -> None:
    def produce() -> None:
        put = q.put
        for i in range(n):
            put(i)

    def consume() -> None:
        get = q.get
        for _ in range(n):
            get()

    threads = [threading.Thread(target=produce), threading.Thread(target=consume)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _per_pair(fn: Callable[[], None], n: int) -> tuple[float, float]:
    """(wall ns, CPU ns) per pair. CPU time is the whole process's, every thread included (the
    agent's and the drainer's too), and is not charged for time other programs held the core."""
    c0, t0 = time.process_time_ns(), time.perf_counter_ns()
    fn()
    t1, c1 = time.perf_counter_ns(), time.process_time_ns()
    return (t1 - t0) / n, (c1 - c0) / n


Runner = Callable[[queue.Queue[Any], int], None]
drops: dict[str, int] = {}


def variants(run: Runner, n: int, label: str) -> list[tuple[str, Callable[[], tuple[float, ...]]]]:
    def bare() -> tuple[float, ...]:
        q: queue.Queue[Any] = queue.Queue(CAPACITY)
        return _per_pair(lambda: run(q, n), n)

    def untapped() -> tuple[float, ...]:
        ch = ThreadChannel(CAPACITY, name="bench")
        return _per_pair(lambda: run(ch, n), n)

    def monitored() -> tuple[float, ...]:
        m = Monitored()

        def go() -> None:
            # Starting and closing the agent are timed too: the last flush is part of the cost.
            with m as ch:
                run(ch, n)

        figures = _per_pair(go, n)
        tail, head = m.channel.tail, m.channel.head
        assert tail is not None
        assert head is not None
        if (tail.base, head.base) != (n, n):
            raise RuntimeError(f"taps saw {tail.base}/{head.base} events, expected {n} each")
        drops[label] = drops.get(label, 0) + m.agent.sent_dropped
        return figures

    return [
        ("queue.Queue (bare)", bare),
        ("ThreadChannel, no taps", untapped),
        ("ThreadChannel + taps + Agent", monitored),
    ]


def report(title: str, by_metric: list[list[Summary]]) -> list[Summary]:
    """Print one table; returns the paired ratios of the monitored variant (wall, CPU)."""
    rows = []
    for metric, results in zip(("wall", "CPU"), by_metric, strict=True):
        bare = results[0]
        for s in results:
            r = paired_ratios(s, bare)
            rows.append(
                [
                    s.name,
                    metric,
                    f"{s.median:,.0f}",
                    fmt_spread(s),
                    f"{s.best:,.0f}",
                    f"{r.median:.2f}x",
                    f"{r.best:.2f}..{max(r.samples):.2f}",
                    f"{s.best / bare.best:.2f}x",
                ]
            )
    print(f"\n{title}")
    headers = ["variant", "clock", "ns/pair", "spread", "best", "vs bare", "range", "best/best"]
    print(table(headers, rows))
    return [paired_ratios(results[-1], results[0]) for results in by_metric]


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    quick = args.quick
    reps = args.reps or (5 if quick else 11)
    n1 = 30_000 if quick else 200_000
    n2 = 15_000 if quick else 100_000
    print(machine())
    print(f"{reps} interleaved repetitions; channel capacity {CAPACITY}; agent flush every 50 ms")
    single = interleave(variants(_single, n1, "single"), reps, metrics=2)
    r1 = report(f"single thread: put then get, {n1:,} pairs per repetition", single)
    threaded = interleave(variants(_threaded, n2, "threaded"), reps, metrics=2)
    r2 = report(f"producer + consumer threads: {n2:,} items per repetition", threaded)
    for label, dropped in drops.items():
        if dropped:
            print(f"note: {label}: {dropped:,} records refused by full taps (cheaper than kept)")
    print(f"\ntarget: monitored <= {TARGET_RATIO:.1f}x bare")
    for name, (wall, cpu) in (("single thread", r1), ("producer/consumer", r2)):
        verdict = "meets" if cpu.median <= TARGET_RATIO else "misses"
        print(
            f"  {name}: {wall.median:.2f}x wall, {cpu.median:.2f}x CPU "
            f"({verdict} the target by CPU time on this machine)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
