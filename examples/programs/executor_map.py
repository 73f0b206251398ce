"""``ProcessPoolExecutor.map`` over a function of the program, as ``concurrent.futures``'s
documentation writes it, the results taken in order as they come. Two worker processes, 10 ms
an item, limit it.

    python executor_map.py [ITEMS]
"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor

from _stamps import work


def square(x):
    with work("square"):
        time.sleep(0.01)
        return x * x


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    total = 0
    with ProcessPoolExecutor(max_workers=2) as executor:
        for result in executor.map(square, range(n)):
            total += result
    print("total", total)
