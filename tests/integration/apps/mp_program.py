"""An ordinary ``multiprocessing`` program, written with no thought of streamscope: a loader
process fills a bounded queue, worker processes do fixed work per item, the main process
collects the results.

    python mp_program.py ITEMS fork|spawn TRUTH.json

Its own truth (``TRUTH.json``): each worker's share of its working life spent working (from its
first item to its last), and that life (monotonic ns).
"""

import json
import multiprocessing as mp
import sys
import time

WORKERS = 2
WORK_S = 0.020  # long beside what a loaded machine adds between items (ms at most)


def loader(out, items):
    for i in range(items):
        out.put(i)
    for _ in range(WORKERS):
        out.put(None)


def worker(inq, outq):
    worked = 0.0
    first = last = None
    while True:
        x = inq.get()
        if x is None:
            break
        t = time.perf_counter()
        first = t if first is None else first
        while time.perf_counter() - t < WORK_S:
            pass
        worked += time.perf_counter() - t
        outq.put(x + 1)
        last = time.perf_counter()
    # perf_counter is the monotonic clock: its life in ns, as the run's frames are placed
    outq.put(("share", worked / (last - first), int(first * 1e9), int(last * 1e9)))


if __name__ == "__main__":
    items, method, truth_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    ctx = mp.get_context(method)
    a = ctx.Queue(8)
    b = ctx.Queue(64)  # room enough that the collector never holds the workers up
    procs = [ctx.Process(target=loader, args=(a, items))]
    procs += [ctx.Process(target=worker, args=(a, b)) for _ in range(WORKERS)]
    for p in procs:
        p.start()
    shares, windows = [], []
    total = 0
    while len(shares) < WORKERS:
        x = b.get()
        if isinstance(x, tuple):
            shares.append(x[1])
            windows.append(x[2:])
        else:
            total += x
    for p in procs:
        p.join()
    print("total", total)
    with open(truth_path, "w") as f:
        json.dump({"work_share": shares, "windows": windows}, f)
