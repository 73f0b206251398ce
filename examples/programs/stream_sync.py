"""A synchronous streamz stream, as streamz's documentation first shows one: the main thread
emits each item into a ``Stream``, ``map`` computes on it (6 ms each: it limits the stream),
``filter`` keeps the even results, ``buffer`` holds up to 8 of them for ``sink``.

    python stream_sync.py [ITEMS]
"""

import sys
import time

from _stamps import work
from streamz import Stream


def slow(x):
    with work("slow"):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.006:
            pass
    return x + 1


def even(x):
    return x % 2 == 0


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    out = []
    source = Stream()
    source.map(slow).filter(even).buffer(8).sink(out.append)
    for i in range(n):
        source.emit(i)
    while len(out) < n // 2:
        time.sleep(0.005)
    print("kept", len(out), "total", sum(out))
