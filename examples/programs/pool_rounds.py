"""A consumer thread on a ``queue.Queue`` and a ``multiprocessing.Pool(2)`` made anew each round,
as ``multiprocessing``'s documentation makes one (``with Pool(2) as pool: pool.map(...)``): the
thread's first ``get`` and the pool's fork happen at the same moment, round after round.

    python pool_rounds.py [ROUNDS]
"""

import queue
import sys
import threading
from multiprocessing import Pool


def square(x):
    return x * x


def consume(q, out):
    while (item := q.get()) is not None:
        out.append(item)


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    total = 0
    for round_ in range(rounds):
        q = queue.Queue()
        out = []
        consumer = threading.Thread(target=consume, args=(q, out))
        consumer.start()
        with Pool(2) as pool:
            q.put(round_)
            total += sum(pool.map(square, range(10)))
        q.put(None)
        consumer.join()
        total += sum(out)
    print("total", total)
