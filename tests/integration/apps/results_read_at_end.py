"""A multiprocessing results queue read only at the end: a producer process puts 200 results
(2 ms apart) while the main process waits 1 s, then the main process takes them all. Prints
their sum, then from its own clock (the host's monotonic one, which both processes read) the
seconds the results spent in the queue, all together."""

import multiprocessing as mp
import time


def work(q: mp.Queue, n: int) -> None:
    for i in range(n):
        time.sleep(0.002)
        q.put((i, time.monotonic()))


if __name__ == "__main__":
    q: mp.Queue = mp.Queue()
    p = mp.Process(target=work, args=(q, 200), name="producer")
    p.start()
    time.sleep(1.0)
    total = held = 0.0
    for _ in range(200):
        i, put = q.get()
        total += i
        held += time.monotonic() - put
    p.join()
    print(int(total))
    print(f"{held:.6f}")
