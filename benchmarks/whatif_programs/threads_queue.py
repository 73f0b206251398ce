"""Threads on standard queues, as the ``queue`` documentation has them: a reader, resize
threads taking from one ``queue.Queue`` (each item a 4 ms wait, as a call to a service is), a
writer. Options: --items, --workers (resize threads), --maxsize, --ms (resize's time)."""

import queue
import threading
import time

from _truth import arg, done, save, stamps_path

ITEMS, WORKERS = int(arg("items", 800)), int(arg("workers", 2))
MAXSIZE, MS = int(arg("maxsize", 8)), arg("ms", 4.0)


def read(out):
    for i in range(ITEMS):
        time.sleep(0.0002)
        out.put(i)
    for _ in range(WORKERS):
        out.put(None)


def resize(inp, out):
    while (item := inp.get()) is not None:
        time.sleep(MS / 1000)
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
    a, b = queue.Queue(MAXSIZE), queue.Queue(MAXSIZE)
    threads = [threading.Thread(target=read, args=(a,)), threading.Thread(target=write, args=(b,))]
    threads += [threading.Thread(target=resize, args=(a, b)) for _ in range(WORKERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    save(stamps_path())
