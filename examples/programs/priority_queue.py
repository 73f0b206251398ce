"""Jobs taken by priority: a ``queue.PriorityQueue`` feeds two worker threads, which hand their
results to a writer through a ``queue.SimpleQueue``, as the ``queue`` documentation shows both
(``(priority, item)`` tuples; ``None`` ends each worker). ``schedule`` makes a job every 1 ms,
each ``worker`` takes 5 ms a job and the two limit it; ``write`` takes no time.

    python priority_queue.py [ITEMS]
"""

import queue
import sys
import threading
import time

from _stamps import entered, left, work

WORKERS = 2


def schedule(jobs, n):
    for i in range(n):
        with work("schedule"):
            time.sleep(0.001)
        jobs.put((i % 3, i))
        entered("schedule -> worker")
    for _ in range(WORKERS):
        jobs.put((9, None))
        entered("schedule -> worker")


def worker(jobs, results):
    while True:
        _, job = jobs.get()
        left("schedule -> worker")
        if job is None:
            results.put(None)
            return
        with work("worker"):
            time.sleep(0.005)
        results.put(job * 2)


def write(results, out):
    done = 0
    while done < WORKERS:
        item = results.get()
        if item is None:
            done += 1
        else:
            out.append(item)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    jobs = queue.PriorityQueue(maxsize=16)
    results = queue.SimpleQueue()
    out = []
    threads = [threading.Thread(target=schedule, args=(jobs, n))]
    threads += [threading.Thread(target=worker, args=(jobs, results)) for _ in range(WORKERS)]
    threads.append(threading.Thread(target=write, args=(results, out)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("jobs", len(out), "total", sum(out))
