"""A multiprocessing.Pool of two processes maps ``split_work.work`` over numbers, as its docs
show (``imap``), and the main process adds up what each call says it spent.

    python split_pool.py ITEMS TRUTH.json

Its own truth (``TRUTH.json``): the workers' ns in each function, all items added.
"""

import json
import sys
from multiprocessing import Pool

from split_work import add, work

if __name__ == "__main__":
    items, out = int(sys.argv[1]), sys.argv[-1]
    totals = {}
    with Pool(2) as pool:
        for spent in pool.imap(work, range(items)):
            add(totals, spent)
    with open(out, "w") as f:
        json.dump(totals, f)
