"""Two threads on one bounded ``queue.Queue``, each item's time drawn at random (exponential,
mean 2 ms each): with a small queue they wait on each other; a larger one lets each run on
through the other's slow items. Options: --items, --maxsize."""

import queue
import random
import threading
import time

from _truth import arg, done, save, stamps_path

ITEMS, MAXSIZE = int(arg("items", 1500)), int(arg("maxsize", 1))


def produce(out):
    rng = random.Random(1)
    for i in range(ITEMS):
        time.sleep(rng.expovariate(1 / 0.002))
        out.put(i)
    out.put(None)


def consume(inp):
    rng = random.Random(2)
    while inp.get() is not None:
        time.sleep(rng.expovariate(1 / 0.002))
        done()


if __name__ == "__main__":
    q = queue.Queue(MAXSIZE)
    threads = [
        threading.Thread(target=produce, args=(q,)),
        threading.Thread(target=consume, args=(q,)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    save(stamps_path())
