"""``multiprocessing.Pool.apply_async`` with a callback, as ``multiprocessing``'s documentation
shows it: each result handed to ``results.put`` (a ``queue.Queue``) by the pool's own
result-handler thread, and a consumer thread of the program taking them. Two workers, 10 ms a
task, limit it; the consumer takes 1 ms a result.

    python apply_callbacks.py [TASKS]
"""

import queue
import sys
import threading
import time
from multiprocessing import Pool

from _stamps import entered, left, work


def cube(x):
    with work("cube"):
        time.sleep(0.01)
        return x**3


def collect(results, n, out):
    for _ in range(n):
        value = results.get()
        left("results")
        with work("collect"):
            time.sleep(0.001)
            out.append(value)


def handed(results):
    def put(value):
        results.put(value)
        entered("results")

    return put


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    results = queue.Queue()
    out = []
    consumer = threading.Thread(target=collect, args=(results, n, out))
    consumer.start()
    with Pool(2) as pool:
        for i in range(n):
            pool.apply_async(cube, (i,), callback=handed(results))
        pool.close()
        pool.join()
    consumer.join()
    print("total", sum(out))
