"""One asyncio task per item, as asyncio's documentation shows for concurrent work: each task
works on its item (some computing, 1 ms of waiting), then puts its result into a queue a
consumer task reads. Prints the sum of the results and, on stderr, the program's own time for
them."""

import asyncio
import sys
import time


async def handle(i: int, results: asyncio.Queue) -> None:
    x = sum(k * k for k in range(12000 + i % 7))
    await asyncio.sleep(0.001)
    await results.put(i * 2 + x % 2)


async def consume(results: asyncio.Queue, n: int) -> int:
    total = 0
    for _ in range(n):
        total += await results.get()
    return total


async def main(n: int) -> None:
    t0 = time.perf_counter()
    results: asyncio.Queue = asyncio.Queue(100)
    consumer = asyncio.create_task(consume(results, n))
    tasks = []
    for i in range(n):
        tasks.append(asyncio.create_task(handle(i, results)))
        if i % 100 == 99:
            await asyncio.sleep(0)
    await asyncio.gather(*tasks)
    print(await consumer)
    print(f"elapsed {time.perf_counter() - t0:.3f}", file=sys.stderr)


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
