"""A producer and three consumers around a ``queue.Queue``, run by a ``ThreadPoolExecutor``, as
``concurrent.futures``'s documentation runs calls; the main thread waits for them with
``as_completed``. The consumers (8 ms an item, three of them) limit it: the queue stays full.

    python executor_queue.py [ITEMS]
"""

import queue
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from _stamps import entered, left, work

CONSUMERS = 3


def produce(q, n):
    for i in range(n):
        with work("produce"):
            time.sleep(0.0005)
        q.put(i)
        entered("produce -> consume")
    for _ in range(CONSUMERS):
        q.put(None)
    return n


def consume(q):
    total = 0
    while True:
        item = q.get()
        left("produce -> consume")
        if item is None:
            return total
        with work("consume"):
            time.sleep(0.008)
            total += item


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 600
    q = queue.Queue(maxsize=16)
    with ThreadPoolExecutor(max_workers=CONSUMERS + 1) as pool:
        futures = [pool.submit(produce, q, n)]
        futures += [pool.submit(consume, q) for _ in range(CONSUMERS)]
        results = [f.result() for f in as_completed(futures)]
    print("produced and consumed", sum(results) - n)
