"""How items cross between hosts: by value in the calls, or as object references.

In: a two-node cluster on this machine (``RayCluster``), a producer on node-a and a consumer on
node-b joined by a bounded queue on node-b (the middle of ``runtime.hosts.link.HostLink``). Out, side
by side for small and large items in batches of ``BATCH``: items per second through the link
and each batch's time from the producer's put to the consumer's get, when a batch travels
inside the call that puts it (*calls*: what streamscope's links do) and when the producer puts
it in its node's object store and sends a reference the consumer resolves (*refs*).

    python benchmarks/bench_host_links.py [--quick] [--reps N]
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from _harness import machine, parse_args, table
from streamscope.runtime.hosts.channel import EndOfStream, HostChannel
from streamscope.runtime.hosts.cluster import RayCluster

BATCH = 16
SIZES = (64, 65_536)  # bytes an item carries


def produce(ch: HostChannel, items: int, size: int, by_ref: bool) -> float:
    """Put ``items`` items of ``size`` bytes in batches; the host time it started."""
    import ray

    payload = b"x" * size
    start = time.monotonic_ns()
    for _ in range(items // BATCH):
        batch = [payload] * BATCH
        sent = time.monotonic_ns()
        ch.put((sent, ray.put(batch) if by_ref else batch))
    ch.close()
    return start / 1e9


def consume(ch: HostChannel) -> tuple[float, list[float]]:
    """Take every batch; the host time the last arrived, and each batch's put-to-get time."""
    import ray

    delays = []
    while not isinstance(msg := ch.get(), EndOfStream):
        sent, batch = msg
        if not isinstance(batch, list):
            batch = ray.get(batch)
        delays.append((time.monotonic_ns() - sent) / 1e3)
        assert len(batch) == BATCH
    return time.monotonic_ns() / 1e9, delays


def once(cluster: RayCluster, items: int, size: int, by_ref: bool) -> tuple[float, float]:
    """Items per second and the median batch delay (µs) of one transfer of ``items``."""
    ray = cluster.ray
    ch = HostChannel(cluster, 4, "node-b")
    ray.get(ch.ready())  # its actor is up before anything is timed
    got: Any = ray.remote(consume).options(**cluster.on_node("node-b")).remote(ch)
    put: Any = (
        ray.remote(produce).options(**cluster.on_node("node-a")).remote(ch, items, size, by_ref)
    )
    start, (end, delays) = ray.get(put), ray.get(got)
    ch.shutdown()
    return items / (end - start), statistics.median(delays)


def main() -> int:
    args = parse_args(__doc__.splitlines()[0])
    reps = args.reps or (2 if args.quick else 5)
    items = 800 if args.quick else 8000
    print(machine())
    rows = []
    with RayCluster.start(["node-a", "node-b"]) as cluster:
        once(cluster, 160, 64, False)  # both workers up before anything is timed
        for size in SIZES:
            res: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for r in range(reps):  # interleaved, the order reversed every other round
                for by_ref in (False, True) if r % 2 == 0 else (True, False):
                    res[by_ref].append(once(cluster, items, size, by_ref))
            calls = statistics.median(x for x, _ in res[False])
            refs = statistics.median(x for x, _ in res[True])
            d_calls = statistics.median(d for _, d in res[False])
            d_refs = statistics.median(d for _, d in res[True])
            rows.append(
                [f"{size:,}", f"{calls:,.0f}", f"{refs:,.0f}", f"{calls / refs:.2f}x",
                 f"{d_calls:,.0f}", f"{d_refs:,.0f}", f"{d_refs / d_calls:.2f}x"]
            )  # fmt: skip
    print(
        table(
            ["item bytes", "calls items/s", "refs items/s", "calls/refs", "calls µs/batch",
             "refs µs/batch", "refs/calls"],
            rows,
        )
    )  # fmt: skip
    print(f"batches of {BATCH}; {items} items a transfer, {reps} transfers each, medians")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
