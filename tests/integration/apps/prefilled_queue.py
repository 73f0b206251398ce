"""A queue filled before anyone takes from it: the main thread puts 500 items (stamped), waits
0.4 s, then starts a consumer thread that takes them all, 1 ms each. Writes its own truth to
the JSON file named last: each item's time in the queue, from its own stamps."""

import json
import queue
import sys
import threading
import time


def consume(q: queue.Queue, waited: list) -> None:
    while (item := q.get()) is not None:
        waited.append(time.perf_counter() - item)
        time.sleep(0.001)


def main() -> None:
    q: queue.Queue = queue.Queue()
    for _ in range(500):
        q.put(time.perf_counter())
    q.put(None)
    time.sleep(0.4)
    waited: list = []
    t = threading.Thread(target=consume, args=(q, waited))
    t.start()
    t.join()
    print(len(waited))
    with open(sys.argv[-1], "w") as f:
        json.dump({"waited": waited}, f)


if __name__ == "__main__":
    main()
