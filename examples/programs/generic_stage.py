"""An app-style program whose stages are one generic thread function, ``stage(j, name)``: the
j-th stage takes from queue j, applies the step registered under ``name`` and puts into queue
j + 1. Nothing of the step is in the thread's arguments but its name, so the stages are told
apart by their place in the flow. The second step (``parse``) is the slowest.

    python generic_stage.py [ITEMS]
"""

import queue
import sys
import threading
import time

from _stamps import entered, left, waiting, work

STEPS = {}


def step(name):
    def register(fn):
        STEPS[name] = fn
        return fn

    return register


@step("load")
def load(x):
    time.sleep(0.001)
    return x


@step("parse")
def parse(x):
    time.sleep(0.005)
    return x * 3


@step("score")
def score(x):
    time.sleep(0.002)
    return x % 7


def stage(j, name):
    fn = STEPS[name]
    while True:
        with waiting(name):
            x = qs[j].get()
        if j == 1:
            left("queue 1")
        if x is None:
            qs[j + 1].put(None)
            return
        with work(name):
            y = fn(x)
        with waiting(name):
            qs[j + 1].put(y)
        if j == 0:
            entered("queue 1")


def feed(n):
    for i in range(n):
        qs[0].put(i)
    qs[0].put(None)


qs = [queue.Queue(maxsize=10) for _ in range(4)]

if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    threads = [threading.Thread(target=stage, args=(j, name)) for j, name in enumerate(STEPS)]
    for t in threads:
        t.start()
    threading.Thread(target=feed, args=(n,)).start()
    results = []
    while (r := qs[3].get()) is not None:
        results.append(r)
    for t in threads:
        t.join()
    print(len(results), "items scored, total", sum(results))
