"""A program that keeps every queue it makes: a maker thread puts one item into each of N new
queues, a taker thread takes it out, and every queue stays alive to the end (N channels of one
family, ``maker -> taker``, ``maker -> taker #2``, ...)."""

import queue
import sys
import threading
import time

kept: list = []


def relay(n: int) -> None:
    for _ in range(n):
        q: queue.Queue = queue.Queue(1)
        q.put(1)
        kept.append(q)


def drain(n: int) -> None:
    k = 0
    while k < n:
        if k < len(kept):
            kept[k].get()
            k += 1
        else:
            time.sleep(0.0005)


def main() -> None:
    n = int(sys.argv[1])
    a = threading.Thread(target=relay, args=(n,), name="maker")
    b = threading.Thread(target=drain, args=(n,), name="taker")
    a.start()
    b.start()
    a.join()
    b.join()
    print(len(kept))


if __name__ == "__main__":
    main()
