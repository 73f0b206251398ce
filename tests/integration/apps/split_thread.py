"""A reader thread puts numbers into a queue.Queue; a worker thread takes each and works on it
(``split_work.work``: pure Python, then hashing, or asleep with ``nap``).

    python split_thread.py ITEMS [nap] [wait] [fast] TRUTH.json

Its own truth (``TRUTH.json``): the worker's ns in each function, all items added, and its
rate (items a second from its first take to its last item done).
"""

import json
import queue
import sys
import threading
import time

from split_work import add, work

items, out = int(sys.argv[1]), sys.argv[-1]
nap, fast, wait = ("nap" in sys.argv[2:-1], "fast" in sys.argv[2:-1], "wait" in sys.argv[2:-1])
q = queue.Queue(maxsize=8)
totals = {}


def reader():
    for i in range(items):
        q.put(i)
    q.put(None)


def worker():
    first = None
    while (item := q.get()) is not None:
        first = first or time.perf_counter()
        add(totals, work(item, nap, fast, wait))
    totals["rate"] = (items - 1) / (time.perf_counter() - first)


threads = [threading.Thread(target=reader), threading.Thread(target=worker)]
for t in threads:
    t.start()
for t in threads:
    t.join()
with open(out, "w") as f:
    json.dump(totals, f)
