"""A hand-written pipeline whose stages share one worker function: decode -> resize -> encode,
each a thread running ``worker(fn, q_in, q_out)`` between bounded queues. ``resize`` is the
slowest step: it limits the pipeline, and the queue in front of it stays full. Each worker
stamps its waits on its queues as well as its work: it is busy the rest of the time.

    python shared_worker.py [ITEMS]
"""

import queue
import sys
import threading
import time

from _stamps import entered, left, waiting, work

DONE = object()


def decode(frame):
    with work("decode"):
        time.sleep(0.001)
        return frame


def resize(frame):
    with work("resize"):
        time.sleep(0.004)
        return frame // 2


def encode(frame):
    with work("encode"):
        time.sleep(0.002)
        return frame + 1


def worker(fn, q_in, q_out):
    name = fn.__name__
    while True:
        with waiting(name):
            item = q_in.get()
        if q_in is stages[1]:
            left("decode -> resize")
        if item is DONE:
            q_out.put(DONE)
            return
        out = fn(item)
        with waiting(name):
            q_out.put(out)
        if q_out is stages[1]:
            entered("decode -> resize")


def feed(n):
    for i in range(n):
        stages[0].put(i)
    stages[0].put(DONE)


def main(n):
    threads = [
        threading.Thread(target=worker, args=(fn, stages[i], stages[i + 1]))
        for i, fn in enumerate((decode, resize, encode))
    ]
    for t in threads:
        t.start()
    feeder = threading.Thread(target=feed, args=(n,))
    feeder.start()
    total = 0
    while (out := stages[3].get()) is not DONE:
        total += out
    for t in (*threads, feeder):
        t.join()
    print("encoded", n, "frames, checksum", total)


stages = [queue.Queue(maxsize=8) for _ in range(4)]

if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 500)
