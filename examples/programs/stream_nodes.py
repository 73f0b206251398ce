"""A streamz stream as streamz's documentation writes an asynchronous one: items emitted into
a ``Stream``, fetched four at a time by ``map_async`` (each awaits 3 ms), parsed by ``map``
(4 ms of computing each, on the event loop: it limits the stream), collected by ``sink``.

    python stream_nodes.py [ITEMS]
"""

import asyncio
import sys
import time

from _stamps import work
from streamz import Stream


async def fetch(i):
    with work("fetch"):
        await asyncio.sleep(0.003)
    return i


def parse(i):
    with work("parse"):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.004:
            pass
    return i * 2


async def main(n):
    results = []
    source = Stream(asynchronous=True)
    source.map_async(fetch, parallelism=4).map(parse).sink(results.append)
    for i in range(n):
        await source.emit(i)
    while len(results) < n:
        await asyncio.sleep(0.005)
    print("parsed", len(results), "total", sum(results))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 300))
