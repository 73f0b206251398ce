"""Six clients, each making a reply queue per request to four worker threads: the queues
of one shape are dropped and made by several threads at once. Prints each client's sum."""

import queue
import sys
import threading


def worker(requests):
    while (req := requests.get()) is not None:
        x, reply = req
        reply.put(x * 2)


def client(requests, n):
    for i in range(n):
        reply = queue.Queue(1)
        requests.put((i, reply))
        got = reply.get()
        assert got == 2 * i, (got, i)


requests = queue.Queue(64)
workers = [threading.Thread(target=worker, args=(requests,)) for _ in range(4)]
clients = [threading.Thread(target=client, args=(requests, int(sys.argv[1]))) for _ in range(6)]
for t in workers + clients:
    t.start()
for c in clients:
    c.join()
for _ in workers:
    requests.put(None)
for w in workers:
    w.join()
print("done", int(sys.argv[1]) * 6)
