"""A program that already uses a pool of workers, instrumented through the drop-in API.

A reader thread feeds items into a bounded queue; a pool of workers (processes, or threads
with ``--threads``) each takes items, works on each for ``--work-ms`` (computing, or with
``--io`` waiting, as a thread pool waiting on I/O does) and passes it on; the main thread
writes the results. The workers are the bottleneck: the queue in front of them
stays full. Each worker names its own stage (``parser0``, ``parser1``, ...), as the README
advises. The program stamps its workers' own busy time itself and, with ``--truth FILE``,
writes it there (JSON), so a test can hold streamscope's figures against it.

    python examples/dropin_pool.py --out pool.duckdb [--threads] [--start spawn]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import threading
import time
from pathlib import Path
from typing import Any

import streamscope as ss

QUERIES = [
    "occupancy(reader -> parser): mean, max every 250ms",
    "state(parser*): duty every 250ms",
    "state(reader): duty every 250ms",
    "state(writer): duty every 250ms",
    "count(reader -> parser): sum every 250ms",
]


def spin(ms: float) -> None:
    end = time.perf_counter() + ms / 1e3
    while time.perf_counter() < end:
        pass


def worker(i: int, inq: Any, outq: Any, work_ms: float, stamps: Any, io: bool = False) -> None:
    """Take items until the end marker; the stage is this worker's own. Stamps (monotonic
    ns, the clock streamscope's host timeline is in): the worker's time in its stage, each
    item's work, and each call that took or passed on an item (the longest it can have waited
    in it)."""
    work: list[tuple[int, int]] = []
    took: list[tuple[int, int]] = []
    gave: list[tuple[int, int]] = []
    with ss.stage(f"parser{i}"):
        start = time.monotonic_ns()
        while True:
            g0 = time.monotonic_ns()
            item = inq.get()
            took.append((g0, time.monotonic_ns()))
            if item is None:
                break
            t0 = time.monotonic_ns()
            if io:
                time.sleep(work_ms / 1e3)  # waiting on something else: the worker is busy
            else:
                spin(work_ms)
            p0 = time.monotonic_ns()
            work.append((t0, p0))
            outq.put(item)
            gave.append((p0, time.monotonic_ns()))
        end = time.monotonic_ns()
    stamps.put((i, start, end, work, took, gave))
    outq.put(None)


def reader(inq: Any, items: int, workers: int) -> None:
    with ss.stage("reader"):
        for k in range(items):
            inq.put(k)
        for _ in range(workers):
            inq.put(None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--items", type=int, default=600)
    ap.add_argument("--work-ms", type=float, default=4.0)
    ap.add_argument("--capacity", type=int, default=32)
    ap.add_argument("--threads", action="store_true", help="a pool of threads, not processes")
    ap.add_argument("--io", action="store_true", help="work by waiting (sleep), as on I/O")
    ap.add_argument("--start", choices=["fork", "spawn", "forkserver"], default="fork")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--truth", type=Path, help="write the workers' own stamps here (JSON)")
    args = ap.parse_args(argv)
    ctx = mp.get_context(args.start)
    inq: Any
    outq: Any
    stamps: Any
    if args.threads:
        inq = ss.Queue(args.capacity, src="reader", dst="parser")
        outq = ss.Queue(args.capacity, src="parser", dst="writer")
        stamps = queue.Queue()
    with ss.monitor(QUERIES, ss.RunOptions(out=args.out, overwrite=True)) as session:
        if not args.threads:  # queues made while monitoring are picked up too
            inq = ss.MPQueue(args.capacity, src="reader", dst="parser", ctx=ctx)
            outq = ss.MPQueue(args.capacity, src="parser", dst="writer", ctx=ctx)
            stamps = ctx.Queue()
        make = threading.Thread if args.threads else ctx.Process
        pool = [
            make(target=worker, args=(i, inq, outq, args.work_ms, stamps, args.io))
            for i in range(args.workers)
        ]
        for w in pool:
            w.start()
        feeder = threading.Thread(target=reader, args=(inq, args.items, args.workers))
        feeder.start()
        done = written = 0
        with ss.stage("writer"):
            while done < args.workers:
                if outq.get() is None:
                    done += 1
                else:
                    written += 1
        truth = [stamps.get() for _ in range(args.workers)]
        feeder.join()
        for w in pool:
            w.join()
    assert session.result is not None
    print(f"{written} items; run {session.result.status}")
    if args.truth is not None:
        args.truth.write_text(
            json.dumps(
                {
                    f"parser{i}": {"start_ns": s, "end_ns": e, "work": w, "get": g, "put": p}
                    for i, s, e, w, g, p in truth
                }
            )
        )
    return session.result.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
