"""Worker processes on a ``multiprocessing.JoinableQueue``, as ``multiprocessing``'s
documentation has them: each ``get`` answered by ``task_done``, the main process waiting in
``join`` until every task is done, the results read after. Two workers, 10 ms a task, limit it.

    python joinable_workers.py [TASKS]
"""

import multiprocessing as mp
import sys
import time

from _stamps import entered, left, waiting, work


def worker(tasks, results):
    while True:
        with waiting("worker"):
            item = tasks.get()
        left("tasks")
        if item is None:
            tasks.task_done()
            break
        with work("worker"):
            time.sleep(0.01)
        results.put(item * item)
        tasks.task_done()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    tasks = mp.JoinableQueue(8)
    results = mp.Queue()
    workers = [mp.Process(target=worker, args=(tasks, results)) for _ in range(2)]
    for w in workers:
        w.start()
    for i in range(n):
        tasks.put(i)
        entered("tasks")
    for _ in workers:
        tasks.put(None)
        entered("tasks")
    tasks.join()
    total = sum(results.get() for _ in range(n))
    for w in workers:
        w.join()
    print("total", total)
