"""Items put in queues long before any consumer takes from them: for each of three queues, a
producer thread puts two items, and a consumer thread started later takes them. Prints, from
its own clock, how long each item waited (s)."""

import queue
import sys
import threading
import time

waits: list[float] = []


def produce(q: queue.Queue[float]) -> None:
    q.put(time.perf_counter())
    q.put(time.perf_counter())


def consume(q: queue.Queue[float]) -> None:
    for _ in range(2):
        waits.append(time.perf_counter() - q.get())


delay = float(sys.argv[1])
queues: list[queue.Queue[float]] = [queue.Queue() for _ in range(3)]
for q in queues:
    p = threading.Thread(target=produce, args=(q,), name="producer")
    p.start()
    p.join()
time.sleep(delay)
for q in queues:
    c = threading.Thread(target=consume, args=(q,), name="consumer")
    c.start()
    c.join()
print(" ".join(f"{w:.6f}" for w in waits))
