"""An asyncio program as its docs show: a producer task fills an asyncio.Queue, a worker task
takes each item and works on it (``split_work.work``, run on the loop itself), main gathers.

    python split_asyncio.py ITEMS TRUTH.json

Its own truth (``TRUTH.json``): the worker's ns in each function, all items added.
"""

import asyncio
import json
import sys

from split_work import add, work

totals = {}


async def producer(q, items):
    for i in range(items):
        await q.put(i)
    await q.put(None)


async def worker(q):
    while (item := await q.get()) is not None:
        add(totals, work(item))
        q.task_done()


async def main(items):
    q = asyncio.Queue(maxsize=8)
    await asyncio.gather(producer(q, items), worker(q))


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
    with open(sys.argv[-1], "w") as f:
        json.dump(totals, f)
