"""An ``asyncio.TaskGroup`` (Python 3.11) running a producer and three consumers around a
bounded ``asyncio.Queue``, as asyncio's documentation writes task groups: the producer fetches
an item every 1 ms, each ``consume`` awaits 6 ms an item, and the three limit it; a ``None``
per consumer ends them.

    python task_group.py [ITEMS]
"""

import asyncio
import sys

from _stamps import entered, left, work

CONSUMERS = 3


async def produce(queue, n):
    for i in range(n):
        with work("produce"):
            await asyncio.sleep(0.001)
        await queue.put(i)
        entered("produce -> consume")
    for _ in range(CONSUMERS):
        await queue.put(None)
        entered("produce -> consume")


async def consume(queue, out):
    while True:
        item = await queue.get()
        left("produce -> consume")
        if item is None:
            return
        with work("consume"):
            await asyncio.sleep(0.006)
        out.append(item)


async def main(n):
    queue = asyncio.Queue(maxsize=12)
    out = []
    async with asyncio.TaskGroup() as tg:
        tg.create_task(produce(queue, n))
        for _ in range(CONSUMERS):
            tg.create_task(consume(queue, out))
    print("consumed", len(out), "total", sum(out))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 500))
