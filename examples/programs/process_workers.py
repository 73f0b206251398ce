"""A ``multiprocessing`` pipeline of named processes, as its documentation starts them: a
reader, two ``compress`` processes (named ``compress-1`` and ``compress-2``) sharing their
input queue, and the main process writing the results. Compressing (CPU work, 20 ms) limits it.

    python process_workers.py [ITEMS]
"""

import multiprocessing as mp
import sys
import time

from _stamps import entered, left, work

COMPRESSORS = 2


def read(out, n):
    for i in range(n):
        out.put(i)
        entered("read -> compress")
    for _ in range(COMPRESSORS):
        out.put(None)


def compress(inq, outq):
    while (item := inq.get()) is not None:
        left("read -> compress")
        with work("compress"):
            t = time.perf_counter()
            while time.perf_counter() - t < 0.020:
                pass
        outq.put(item % 97)
    left("read -> compress")
    outq.put(None)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 120
    raw, packed = mp.Queue(maxsize=12), mp.Queue()
    procs = [mp.Process(target=read, args=(raw, n))]
    procs += [
        mp.Process(target=compress, args=(raw, packed), name=f"compress-{i + 1}")
        for i in range(COMPRESSORS)
    ]
    for p in procs:
        p.start()
    done = total = 0
    while done < COMPRESSORS:
        item = packed.get()
        if item is None:
            done += 1
        else:
            total += item
    for p in procs:
        p.join()
    print("written", total)
