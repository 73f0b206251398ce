"""``multiprocessing.Pool.imap`` over a function of the program, as the ``multiprocessing``
documentation uses it: each item a 5 ms wait in a worker process, the results taken in order by
the main process. Options: --items, --workers (the pool's processes)."""

import multiprocessing as mp
import time

from _truth import arg, done, save, stamps_path

ITEMS, WORKERS = int(arg("items", 600)), int(arg("workers", 2))


def fetch(i):
    time.sleep(0.005)
    return i


if __name__ == "__main__":
    with mp.Pool(WORKERS) as pool:
        for _ in pool.imap(fetch, range(ITEMS)):
            done()
    save(stamps_path())
