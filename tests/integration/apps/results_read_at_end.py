"""A multiprocessing results queue read only at the end: a producer process puts 200 results
(2 ms apart) while the main process waits 1 s, then the main process takes them all."""

import multiprocessing as mp
import time


def work(q: mp.Queue, n: int) -> None:
    for i in range(n):
        time.sleep(0.002)
        q.put(i)


if __name__ == "__main__":
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=work, args=(q, 200), name="producer")
    p.start()
    time.sleep(1.0)
    total = sum(q.get() for _ in range(200))
    p.join()
    print(total)
