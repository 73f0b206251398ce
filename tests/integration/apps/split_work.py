"""What each item costs the slow stage of the ``split_*`` programs, and the program's own
clock of it: about 3.5 ms of pure-Python arithmetic (``crunch``), then about 1.5 ms hashing a
buffer (``digest``: hashlib's C code, which lets go of the interpreter lock), or, with
``nap``, about 2 ms of it asleep (``doze``) after 2 ms of ``crunch``; with ``fast``, ``crunch``
(with ``nap``: ``doze``) takes half its time. Each call adds its own
perf_counter_ns span to the totals it returns."""

import hashlib
import os
import time

DATA = os.urandom(1 << 16)


def crunch(seconds):
    end = time.perf_counter() + seconds
    x = 0
    while time.perf_counter() < end:
        x += 1
    return x


def digest(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        hashlib.sha256(DATA).digest()


def doze(seconds):
    time.sleep(seconds)


def work(item, nap=False, fast=False, wait=False):
    """One item: the ns spent in each function, by name (``fast``: crunch, or with ``nap`` or
    ``wait`` doze, in half the time; ``wait``: 3 ms of crunch, then 10 ms asleep)."""
    t0 = time.perf_counter_ns()
    crunch(0.003 if wait else 0.002 if nap else 0.00175 if fast else 0.0035)
    t1 = time.perf_counter_ns()
    if wait:
        doze(0.005 if fast else 0.010)
    elif nap:
        doze(0.001 if fast else 0.002)
    else:
        digest(0.0015)
    t2 = time.perf_counter_ns()
    return {"crunch": t1 - t0, "doze" if nap or wait else "digest": t2 - t1}


def add(totals, spent):
    for k, v in spent.items():
        totals[k] = totals.get(k, 0) + v
