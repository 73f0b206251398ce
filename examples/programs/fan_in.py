"""Two producers feeding one consumer through one ``queue.Queue`` (a fan-in), as the ``queue``
documentation's workers share a queue: ``fast`` puts an item every 1 ms, ``slow`` one every 4
ms, ``sink`` takes 2 ms an item and limits them both; each producer ends with a ``None``.

    python fan_in.py [ITEMS]
"""

import queue
import sys
import threading
import time

from _stamps import entered, left, waiting, work


def produce(name, q, n, pause):
    for i in range(n):
        with work(name):
            time.sleep(pause)
        q.put(i)
        entered("fast, slow -> sink")
    q.put(None)
    entered("fast, slow -> sink")


def fast(q, n):
    produce("fast", q, n, 0.001)


def slow(q, n):
    produce("slow", q, n // 4, 0.004)


def sink(q, producers, out):
    done = 0
    while done < producers:
        with waiting("sink"):
            item = q.get()
        left("fast, slow -> sink")
        if item is None:
            done += 1
            continue
        with work("sink"):
            time.sleep(0.002)
            out.append(item)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 400
    q = queue.Queue(maxsize=16)
    out = []
    threads = [
        threading.Thread(target=fast, args=(q, n)),
        threading.Thread(target=slow, args=(q, n)),
        threading.Thread(target=sink, args=(q, 2, out)),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("items", len(out), "total", sum(out))
