"""A program whose names would act on a terminal: its producer thread is named with a window
title and a clear-screen sequence, its consumer with rich's markup. It says ``ready`` and waits
until the FIFO it is given is written to and closed, then moves its items.

    python escaped_names.py ITEMS GO_FIFO
"""

import queue
import sys
import threading

NAME = "\x1b]0;pwned\x07evil\x1b[2J"
ITEMS = int(sys.argv[1])


def produce(out):
    for i in range(ITEMS):
        out.put(i)
    out.put(None)


def consume(inq):
    while inq.get() is not None:
        pass


if __name__ == "__main__":
    print("ready", flush=True)
    with open(sys.argv[2]) as go:
        go.read()
    q = queue.Queue(8)
    threads = [
        threading.Thread(target=produce, args=(q,), name=NAME),
        threading.Thread(target=consume, args=(q,), name="[bold]sink[/bold]"),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print("done")
