"""An ordinary ``asyncio`` program, written with no thought of streamscope: a producer task
fills a bounded ``asyncio.Queue``, two consumer tasks each wait 12 ms per item (as a call to a
service would), the main task gathers them.

    python async_program.py ITEMS TRUTH.json

Its own truth (``TRUTH.json``): each consumer's share of its working life spent on its items
(from its first item to its last) and that life (monotonic ns), and the producer's share of its
life spent waiting in put, and that life.
"""

import asyncio
import json
import sys
import time

CONSUMERS = 2
truth = {"work_share": [], "put_share": 0.0, "windows": []}


async def produce(q, items):
    waited = 0.0
    start = time.perf_counter()
    start_ns = time.monotonic_ns()
    for i in range(items):
        t = time.perf_counter()
        await q.put(i)
        waited += time.perf_counter() - t
    truth["put_share"] = waited / (time.perf_counter() - start)
    truth["produce_window"] = [start_ns, time.monotonic_ns()]
    for _ in range(CONSUMERS):
        await q.put(None)


async def consume(q, out):
    worked = 0.0
    first = last = None
    first_ns = 0
    while True:
        x = await q.get()
        if x is None:
            break
        t = time.perf_counter()
        if first is None:
            first, first_ns = t, time.monotonic_ns()
        await asyncio.sleep(0.012)
        worked += time.perf_counter() - t
        out.append(x)
        last = time.perf_counter()
    truth["work_share"].append(worked / (last - first))
    truth["windows"].append([first_ns, time.monotonic_ns()])


async def main(items):
    q = asyncio.Queue(8)
    out = []
    await asyncio.gather(produce(q, items), *(consume(q, out) for _ in range(CONSUMERS)))
    print("sum", sum(out))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
    with open(sys.argv[2], "w") as f:
        json.dump(truth, f)
