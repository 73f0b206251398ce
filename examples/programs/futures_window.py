"""A bounded window of ``ProcessPoolExecutor`` futures: at most 8 jobs outstanding, the next
submitted as one completes (``concurrent.futures.wait(..., return_when=FIRST_COMPLETED)``), the
way one streams a long input through a process pool without queueing all of it. Two worker
processes, 10 ms a job, limit it.

    python futures_window.py [ITEMS]
"""

import sys
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

from _stamps import work

WINDOW = 8


def crunch(x):
    with work("crunch"):
        time.sleep(0.01)
        return x % 7


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    total = done = 0
    with ProcessPoolExecutor(max_workers=2) as executor:
        pending = set()
        for i in range(n):
            if len(pending) >= WINDOW:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    total += f.result()
                    done += 1
            pending.add(executor.submit(crunch, i))
        for f in wait(pending).done:
            total += f.result()
            done += 1
    print("done", done, "total", total)
