"""joblib's ``Parallel`` over loky's worker processes, as joblib's documentation writes it: a
generator of ``delayed`` calls to a function of the program, two jobs, the results taken as
they come (``return_as="generator"``). The workers (30 ms an item, two of them) limit it.

    python joblib_parallel.py [ITEMS]
"""

import sys
import time

from _stamps import work
from joblib import Parallel, delayed


def score(x):
    with work("score"):
        time.sleep(0.03)
        return x * x


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    parallel = Parallel(n_jobs=2, return_as="generator")
    total = 0
    for result in parallel(delayed(score)(i) for i in range(n)):
        total += result
    print("total", total)
