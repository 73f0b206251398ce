"""A program that makes its queues one at a time: for each, a producer thread and a consumer
thread pass a few items through it, then the queue is dropped. Prints its result on stdout and
the most file descriptors it held on stderr (``fds N``)."""

import os
import queue
import sys
import threading


def produce(q: queue.Queue, n: int) -> None:
    for i in range(n):
        q.put(i)
    q.put(None)


def consume(q: queue.Queue, out: list) -> None:
    while (x := q.get()) is not None:
        out.append(x)


def main() -> None:
    n = int(sys.argv[1])
    total = most = 0
    for k in range(n):
        q: queue.Queue = queue.Queue(4)
        out: list = []
        t1 = threading.Thread(target=produce, args=(q, 3))
        t2 = threading.Thread(target=consume, args=(q, out))
        t1.start()
        t2.start()
        t1.join()
        t2.join()
        total += sum(out) + k
        if k % 50 == 0:
            most = max(most, len(os.listdir("/proc/self/fd")))
    print(total)
    print(f"fds {most}", file=sys.stderr)


if __name__ == "__main__":
    main()
