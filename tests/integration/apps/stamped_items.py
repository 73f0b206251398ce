"""An ordinary threaded program, written with no thought of streamscope: a reader makes items
at random (Poisson) times into a bounded queue, a pool of parser threads does waiting work
per item, a writer takes the results. The program notes when each item left the reader (just
after its put) and when the writer took it (just after its get).

    python stamped_items.py ITEMS TRUTH.json

Its own truth (``TRUTH.json``): every item's time from the reader to the writer (ns).
"""

import json
import queue
import random
import sys
import threading
import time

ITEMS = int(sys.argv[1])
PARSERS = 3
sent: dict[int, int] = {}
taken: dict[int, int] = {}


def reader(out):
    rng = random.Random(7)
    due = time.monotonic()
    for i in range(ITEMS):
        due += rng.expovariate(800.0)
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        out.put(i)
        sent[i] = time.monotonic_ns()
    for _ in range(PARSERS):
        out.put(None)


def parser(inq, outq):
    rng = random.Random(threading.get_ident())
    while True:
        x = inq.get()
        if x is None:
            outq.put(None)
            break
        time.sleep(rng.uniform(0.001, 0.005))
        outq.put(x)


def writer(inq):
    done = 0
    while done < PARSERS:
        x = inq.get()
        if x is None:
            done += 1
        else:
            taken[x] = time.monotonic_ns()
    print("written", len(taken))


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
    with open(sys.argv[2], "w") as f:
        json.dump([taken[i] - sent[i] for i in range(ITEMS)], f)
