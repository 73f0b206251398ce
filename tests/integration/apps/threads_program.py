"""An ordinary threaded program, written with no thought of streamscope: a reader fills a
bounded queue, a pool of parser threads does fixed work per item, a writer sums the results.
The work waits (as a call to a service would): threads that computed in Python would take turns
on the interpreter's lock and could never all be saturated at once.

    python threads_program.py ITEMS TRUTH.json [PARSERS]

Its own truth (``TRUTH.json``): each parser's share of its working life spent parsing (from
its first item to its last), and how often the reader found the input queue full.
"""

import json
import queue
import sys
import threading
import time

ITEMS = int(sys.argv[1])
WORK_S = 0.010  # long beside what a loaded machine adds between items (ms at most)
PARSERS = int(sys.argv[3]) if len(sys.argv) > 3 else 3
truth = {"parse_share": [], "reader_full": 0, "reader_puts": 0}
lock = threading.Lock()


def reader(out):
    for i in range(ITEMS):
        truth["reader_full"] += out.full()
        truth["reader_puts"] += 1
        out.put(i)
    for _ in range(PARSERS):
        out.put(None)


def parser(inq, outq):
    worked = 0.0
    first = last = None
    while True:
        x = inq.get()
        if x is None:
            outq.put(None)
            break
        t = time.perf_counter()
        first = t if first is None else first
        time.sleep(WORK_S)
        worked += time.perf_counter() - t
        outq.put(x * 2)
        last = time.perf_counter()
    with lock:
        truth["parse_share"].append(worked / (last - first))


def writer(inq):
    done = total = 0
    while done < PARSERS:
        x = inq.get()
        if x is None:
            done += 1
        else:
            total += x
    print("total", total)


if __name__ == "__main__":
    a = queue.Queue(16)
    b = queue.Queue(16)
    threads = [threading.Thread(target=reader, args=(a,))]
    threads += [threading.Thread(target=parser, args=(a, b)) for _ in range(PARSERS)]
    threads += [threading.Thread(target=writer, args=(b,))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")
    with open(sys.argv[2], "w") as f:
        json.dump(truth, f)
