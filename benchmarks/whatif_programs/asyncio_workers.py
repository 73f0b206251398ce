"""asyncio worker tasks on an ``asyncio.Queue``, as the asyncio documentation's queue example
has them: a producer, worker tasks each awaiting a 6 ms call per item. Options: --items,
--workers (tasks), --maxsize."""

import asyncio

from _truth import arg, done, save, stamps_path

ITEMS, WORKERS, MAXSIZE = int(arg("items", 1000)), int(arg("workers", 3)), int(arg("maxsize", 10))


async def worker(queue):
    while True:
        await queue.get()
        await asyncio.sleep(0.006)
        done()
        queue.task_done()


async def main():
    queue = asyncio.Queue(MAXSIZE)
    tasks = [asyncio.create_task(worker(queue)) for _ in range(WORKERS)]
    for i in range(ITEMS):
        await queue.put(i)
    await queue.join()
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


if __name__ == "__main__":
    asyncio.run(main())
    save(stamps_path())
