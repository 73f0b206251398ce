"""An ``asyncio`` program whose main task waits on its other tasks in each of the ways asyncio
documents: the end of a ``TaskGroup``, ``gather``, the task itself, and ``asyncio.wait``. Each
time a ``worker`` task puts items through a queue to a ``sink`` task for about 0.25 s while
main only waits.

    python awaits.py TRUTH.json

Its own truth (``TRUTH.json``): how long main spent in each wait (ns, monotonic), and its life.
"""

import asyncio
import json
import sys
import time

truth = {"waits": {}}


async def worker(q):
    for i in range(25):
        await asyncio.sleep(0.01)
        await q.put(i)
    await q.put(None)


async def sink(q):
    while await q.get() is not None:
        pass


async def timed(name, awaitable_of):
    t0 = time.monotonic_ns()
    await awaitable_of()
    truth["waits"][name] = time.monotonic_ns() - t0


async def main():
    t0 = time.monotonic_ns()
    q = asyncio.Queue(maxsize=4)

    async def group():
        async with asyncio.TaskGroup() as tg:
            tg.create_task(worker(q))
            tg.create_task(sink(q))

    await timed("task_group", group)
    await timed("gather", lambda: asyncio.gather(worker(q), sink(q)))
    s = asyncio.create_task(sink(q))
    await timed("task", lambda: _both(asyncio.create_task(worker(q)), s))
    both = {asyncio.create_task(worker(q)), asyncio.create_task(sink(q))}
    await timed("wait", lambda: asyncio.wait(both))
    truth["life"] = time.monotonic_ns() - t0
    print("done")


async def _both(w, s):
    await w
    await s


if __name__ == "__main__":
    asyncio.run(main())
    with open(sys.argv[1], "w") as f:
        json.dump(truth, f)
