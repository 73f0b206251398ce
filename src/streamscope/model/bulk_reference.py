"""The bulk bus's reference: the original event loop, one transfer and then one item at a time.
Item arrival times (ns) and the bus parameters in, per-item times out, for the tests and the
benchmarks to hold :mod:`~streamscope.model.bulk`'s fast paths to, bit for bit.
"""

from __future__ import annotations

import math
from bisect import bisect_right

import numpy as np

from streamscope.model._inputs import F64

__all__ = ["event_loop_reference"]


def _start_time(
    av: list[float], h: int, lo: int, free: float, timeout_ns: float, end: float
) -> float:
    """When the transfer whose first item is ``h`` starts, the bus being free at ``free``."""
    n = len(av)
    t = max(free, av[h + lo - 1]) if h + lo - 1 < n else max(free, end)
    if timeout_ns < math.inf:
        for i in range(h, min(h + lo - 1, n)):
            ti = max(free, av[i] + timeout_ns)
            if ti >= t:
                break
            if i + 1 == n or av[i + 1] > ti:
                return ti
    return t


def event_loop_reference(
    a: F64,
    b: int,
    lo: int,
    tr: F64,
    per_item_ns: float,
    timeout_ns: float,
    end: float,
    s2: F64 | None,
    cap2: int,
    latency_ns: float = 0.0,
    preloaded: int = 0,
) -> tuple[F64, F64, F64, F64]:
    """The bus of :func:`~streamscope.model.bulk.bulk_transfer` (bulk size ``b``, quorum ``lo``,
    transfer times ``tr``) and, with ``s2``, the device buffer of ``cap2`` places and server of
    :func:`~streamscope.model.bulk.tandem_bulk`, extended by latency and preloaded items.

    Returns start1, done1, deliver and (when ``s2`` is given) depart, all item by item.
    """
    n = a.size
    av, trv = a.tolist(), tr.tolist()
    s2v = s2.tolist() if s2 is not None else []
    start, done, deliver, d2 = [0.0] * n, [0.0] * n, [0.0] * n, [0.0] * n
    free = -math.inf
    d_prev = -math.inf
    for k in range(preloaded):
        start[k] = done[k] = deliver[k] = av[k]
        if s2 is not None:
            d_prev = max(av[k], d_prev) + s2v[k]
            d2[k] = d_prev
    h = preloaded
    j = 0
    while h < n:
        t = _start_time(av, h, lo, free, timeout_ns, end)
        m = bisect_right(av, t, h, min(h + b, n)) - h
        fin = t + trv[j] + per_item_ns * m
        last = h + m - 1
        got = fin + latency_ns
        free = fin
        if s2 is not None and last - cap2 - 1 >= 0 and d2[last - cap2 - 1] > got:
            got = free = d2[last - cap2 - 1]
        for k in range(h, h + m):
            start[k], done[k], deliver[k] = t, fin, got
            if s2 is not None:
                d_prev = max(got, d_prev) + s2v[k]
                d2[k] = d_prev
        h += m
        j += 1

    def f64(x: list[float]) -> F64:
        return np.asarray(x, dtype=np.float64)

    return f64(start), f64(done), f64(deliver), f64(d2)
