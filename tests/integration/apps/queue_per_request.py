"""A server-shaped program that makes a queue per request: a client thread sends requests at a
steady rate to a pool of worker threads over one queue, each request with a reply queue of its
own, made for it and dropped once answered. Prints the sum of the replies."""

import queue
import sys
import threading
import time


def worker(requests: queue.Queue) -> None:
    while (req := requests.get()) is not None:
        x, reply = req
        reply.put(x * 2)


def client(requests: queue.Queue, n: int, rate: float, out: list) -> None:
    t0 = time.perf_counter()
    total = 0
    for i in range(n):
        reply: queue.Queue = queue.Queue(1)
        requests.put((i, reply))
        total += reply.get()
        ahead = t0 + (i + 1) / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
    out.append(total)


def main() -> None:
    n, rate = int(sys.argv[1]), float(sys.argv[2])
    requests: queue.Queue = queue.Queue(64)
    workers = [threading.Thread(target=worker, args=(requests,)) for _ in range(4)]
    for w in workers:
        w.start()
    out: list = []
    c = threading.Thread(target=client, args=(requests, n, rate, out))
    c.start()
    c.join()
    for _ in workers:
        requests.put(None)
    for w in workers:
        w.join()
    print(out[0])


if __name__ == "__main__":
    main()
