"""The ``asyncio.Queue`` example of Python's documentation, as a stream: a producer task puts
work items of varying length into a bounded queue, three worker tasks take them and await
``asyncio.sleep`` for each. The workers limit it: the queue stays nearly full.

    python asyncio_workers.py [ITEMS]
"""

import asyncio
import random
import sys

from _stamps import entered, left, work


async def worker(name, queue):
    while True:
        sleep_for = await queue.get()
        left("producer -> worker")
        with work("worker"):
            await asyncio.sleep(sleep_for)
        queue.task_done()


async def producer(queue, n):
    rng = random.Random(7)
    for _ in range(n):
        await queue.put(rng.uniform(0.002, 0.008))
        entered("producer -> worker")


async def main(n):
    queue = asyncio.Queue(maxsize=10)
    tasks = [asyncio.create_task(worker(f"worker-{i}", queue)) for i in range(3)]
    await producer(queue, n)
    await queue.join()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    print(f"3 workers handled {n} items")


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 600))
