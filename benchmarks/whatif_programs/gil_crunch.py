"""Threads whose middle stage is pure Python (3 ms of computing an item): read -> crunch ->
write on ``queue.Queue(8)``. Its threads take turns on the interpreter lock: more crunch
threads cannot go faster. Options: --items, --workers (crunch threads), --turns (the work of an
item; by default what takes 3 ms here, measured at its start)."""

import queue
import threading
import time

from _truth import arg, done, save, stamps_path

ITEMS, WORKERS = int(arg("items", 600)), int(arg("workers", 1))


def spin(turns):
    x = 0
    for i in range(turns):
        x += i * i
    return x


def turns_for(seconds):
    """How many turns of ``spin`` take ``seconds`` here (work, not time: two threads sharing
    the interpreter lock each take longer to do it), the quickest of five tries."""
    took = []
    for _ in range(5):
        t = time.perf_counter()
        spin(100_000)
        took.append(time.perf_counter() - t)
    return int(100_000 * seconds / min(took))


TURNS = int(arg("turns", 0)) or turns_for(0.003)


def read(out):
    for i in range(ITEMS):
        out.put(i)
    for _ in range(WORKERS):
        out.put(None)


def crunch(inp, out):
    while (item := inp.get()) is not None:
        spin(TURNS)
        out.put(item)
    out.put(None)


def write(inp):
    ended = 0
    while ended < WORKERS:
        if inp.get() is None:
            ended += 1
        else:
            done()


if __name__ == "__main__":
    a, b = queue.Queue(8), queue.Queue(8)
    threads = [threading.Thread(target=read, args=(a,)), threading.Thread(target=write, args=(b,))]
    threads += [threading.Thread(target=crunch, args=(a, b)) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    save(stamps_path())
