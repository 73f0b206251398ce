"""An ``mpire.WorkerPool`` mapping a function over a list, as mpire's documentation does: each
worker process gets its own task queue, all put their results into one. ``transform``, 5 ms a
task over two workers, limits it.

    python mpire_map.py [ITEMS]
"""

import sys
import time

from _stamps import work
from mpire import WorkerPool


def transform(x):
    with work("transform"):
        time.sleep(0.005)
        return x * x


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    with WorkerPool(n_jobs=2) as pool:
        results = pool.map(transform, range(n), chunk_size=1)
    print("sum of squares", sum(results))
