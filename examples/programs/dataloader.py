"""A data loader shaped as PyTorch's ``DataLoader`` (two worker processes), without torch: the
main process hands each worker sample indices through that worker's own index queue (at most
two outstanding each), the workers load samples and put them into one shared result queue, a
pin-memory thread moves them on, and the main loop puts them back in order (a reorder buffer)
before a training step. Loading a sample takes 8 ms: the workers limit it.

    python dataloader.py [SAMPLES]
"""

import multiprocessing as mp
import queue
import sys
import threading
import time

from _stamps import entered, left, work

WORKERS = 2
PREFETCH = 2


class Dataset:
    def __getitem__(self, i):
        with work("load"):
            time.sleep(0.008)
            return i * 10


def _worker_loop(dataset, index_queue, data_queue):
    while True:
        i = index_queue.get()
        left("index queues")
        if i is None:
            return
        data_queue.put((i, dataset[i]))


def _pin_memory_loop(data_queue, pinned, n):
    for _ in range(n):
        i, sample = data_queue.get()
        pinned.put((i, sample))


def batches(n):
    dataset = Dataset()
    index_queues = [mp.Queue() for _ in range(WORKERS)]
    data_queue = mp.Queue()
    workers = [
        mp.Process(target=_worker_loop, args=(dataset, index_queues[w], data_queue), daemon=True)
        for w in range(WORKERS)
    ]
    for w in workers:
        w.start()
    pinned = queue.Queue()
    pin = threading.Thread(target=_pin_memory_loop, args=(data_queue, pinned, n), daemon=True)
    pin.start()
    sent = 0
    for _ in range(PREFETCH * WORKERS):
        index_queues[sent % WORKERS].put(sent)
        entered("index queues")
        sent += 1
    reorder, expected = {}, 0
    while expected < n:
        i, sample = pinned.get()
        reorder[i] = sample
        if sent < n:
            index_queues[sent % WORKERS].put(sent)
            entered("index queues")
            sent += 1
        while expected in reorder:
            yield reorder.pop(expected)
            expected += 1
    for q in index_queues:
        q.put(None)
    for w in workers:
        w.join()


if __name__ == "__main__":
    loss = 0
    for sample in batches(int(sys.argv[1]) if len(sys.argv) > 1 else 400):
        with work("train"):
            time.sleep(0.001)
            loss += sample
    print("loss", loss)
