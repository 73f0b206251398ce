"""Two threads on two ``queue.Queue`` s, as such code is written: the main thread puts 300
items, ``work`` takes 2 ms over each (the slow stage), ``sink`` takes them. Run as it is, or
pasted into a notebook's cell or a ``with`` block."""

import queue
import threading
import time


def work(inp, out):
    while (x := inp.get()) is not None:
        time.sleep(0.002)
        out.put(x)
    out.put(None)


def sink(inp):
    while inp.get() is not None:
        pass


a, b = queue.Queue(8), queue.Queue(8)
threads = [threading.Thread(target=work, args=(a, b)), threading.Thread(target=sink, args=(b,))]
for t in threads:
    t.start()
for i in range(300):
    a.put(i)
a.put(None)
for t in threads:
    t.join()
