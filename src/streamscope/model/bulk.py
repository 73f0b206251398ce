"""The bus as a bulk server, alone and in the seed's two-stage tandem: item arrival times (ns)
and transfer/service times in, per-item times through each stage out (host buffer, bus, device).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from streamscope.model._inputs import (
    F64,
    ModelInputError,
    as_durations,
    as_times,
    check_capacity,
    check_sorted,
)
from streamscope.model.recursions import _lindley, _shift

__all__ = ["BulkTandemTimes", "bulk_transfer", "tandem_bulk"]


class BulkTandemTimes(NamedTuple):
    """Per-item times (ns). Host buffer: arrive..start1; bus: start1..deliver; device buffer:
    deliver..start2; device server: start2..depart; the whole virtual queue: arrive..depart."""

    start1: F64  #: its transfer starts (leaves the host buffer)
    done1: F64  #: its transfer ends
    deliver: F64  #: enters the device buffer (= done1 unless the bus is blocked by a full buffer)
    start2: F64  #: device service starts
    depart: F64  #: leaves the device server


def _params(
    arrive: ArrayLike, bulk_size: int, min_batch: int | None, transfer_ns: ArrayLike
) -> tuple[F64, int, int, F64]:
    a = as_times("arrive", arrive)
    check_sorted("arrive", a)
    if int(bulk_size) != bulk_size or bulk_size < 1:
        raise ModelInputError(f"bulk_size must be an integer >= 1, got {bulk_size!r}")
    lo = int(bulk_size) if min_batch is None else int(min_batch)
    if not 1 <= lo <= bulk_size:
        raise ModelInputError(f"min_batch must be in 1..bulk_size={bulk_size}, got {min_batch!r}")
    return a, int(bulk_size), lo, as_durations("transfer_ns", transfer_ns, a.size)


def _end(a: F64, end_ns: float | None) -> float:
    last = float(a[-1])
    if end_ns is None:
        return last
    if not end_ns >= last:
        raise ModelInputError(f"end_ns={end_ns} is before the last arrival at {last} ns")
    return float(end_ns)


def _quorum_fast(a: F64, b: int, tr: F64, per_item_ns: float, end: float) -> tuple[F64, F64]:
    """a = b and no timeout: batches are fixed blocks of b items, so the bus is a Lindley queue
    whose "arrivals" are the b-th arrival of each block (the last, partial block at ``end``)."""
    n = a.size
    nb = -(-n // b)
    trigger = a[b - 1 :: b]
    sizes = np.full(nb, float(b))
    if trigger.size < nb:
        trigger = np.append(trigger, max(end, float(a[-1])))
        sizes[-1] = n - (nb - 1) * b
    done_b = _lindley(trigger, tr[:nb] + per_item_ns * sizes)
    start_b = np.maximum(trigger, _shift(done_b, 1))
    return np.repeat(start_b, b)[:n], np.repeat(done_b, b)[:n]


def _event_loop(
    a: F64,
    b: int,
    lo: int,
    tr: F64,
    per_item_ns: float,
    timeout_ns: float,
    end: float,
    s2: F64 | None,
    cap2: int,
) -> tuple[F64, F64, F64, F64]:
    """Exact event loop, one transfer per iteration (plus one step per item when the device
    buffer is finite). A loop because the start of each transfer depends on where the previous
    one ended *and* on which arrivals fall in a timeout window, a search, not a max-plus step.
    Returns start1, done1, deliver and (when ``s2`` is given) depart.
    """
    n = a.size
    av, trv = a.tolist(), tr.tolist()
    s2v = s2.tolist() if s2 is not None else []
    start = [0.0] * n
    done = [0.0] * n
    deliver = [0.0] * n
    d2 = [0.0] * n
    free = -math.inf
    d_prev = -math.inf
    h = j = 0
    while h < n:
        t = max(free, av[h + lo - 1]) if h + lo - 1 < n else max(free, end)
        if timeout_ns < math.inf:
            for i in range(h, min(h + lo - 1, n)):
                ti = max(free, av[i] + timeout_ns)
                if ti >= t:
                    break
                if i + 1 == n or av[i + 1] > ti:
                    t = ti
                    break
        m = bisect_right(av, t, h, min(h + b, n)) - h
        fin = t + trv[j] + per_item_ns * m
        last = h + m - 1
        got = fin
        if s2 is not None and last - cap2 - 1 >= 0:
            got = max(fin, d2[last - cap2 - 1])
        for k in range(h, h + m):
            start[k], done[k], deliver[k] = t, fin, got
            if s2 is not None:
                d_prev = max(got, d_prev) + s2v[k]
                d2[k] = d_prev
        free = got
        h += m
        j += 1

    def f64(x: list[float]) -> F64:
        return np.asarray(x, dtype=np.float64)

    return f64(start), f64(done), f64(deliver), f64(d2)


def bulk_transfer(
    arrive: ArrayLike,
    bulk_size: int,
    transfer_ns: ArrayLike,
    *,
    min_batch: int | None = None,
    per_item_ns: float = 0.0,
    timeout_ns: float = math.inf,
    end_ns: float | None = None,
) -> tuple[F64, F64]:
    """``(start, done)`` per item (ns) for a bus that moves items from a host buffer in bulk.

    The M/M^(a,b)/1 general bulk-service rule with ``b = bulk_size`` and ``a = min_batch``
    (default ``a = b``): when the bus is free at ``F`` it starts the next transfer at the
    earliest ``t >= F`` at which, with ``q(t)`` items waiting,

    1. ``q(t) >= a`` (quorum); or
    2. ``q(t) >= 1`` and no item has arrived for ``timeout_ns`` (inactivity flush); or
    3. ``q(t) >= 1`` and the stream has ended (``t >= end_ns``, default the last arrival).

    It carries the ``min(q(t), b)`` oldest items; no late entry: an item arriving after ``t``
    waits for a later transfer. Transfer ``j`` takes ``transfer_ns[j] + per_item_ns * m``
    (``transfer_ns`` a scalar or one value per possible transfer, i.e. per item).
    """
    a, b, lo, tr = _params(arrive, bulk_size, min_batch, transfer_ns)
    if a.size == 0:
        return a.copy(), a.copy()
    end = _end(a, end_ns)
    if lo == b and timeout_ns == math.inf:
        return _quorum_fast(a, b, tr, per_item_ns, end)
    start, done, _, _ = _event_loop(a, b, lo, tr, per_item_ns, timeout_ns, end, None, 0)
    return start, done


def tandem_bulk(
    arrive: ArrayLike,
    bulk_size: int,
    transfer_ns: ArrayLike,
    timeout_ns: float,
    s2: ArrayLike,
    capacity2: int | None = None,
    *,
    min_batch: int | None = None,
    per_item_ns: float = 0.0,
    end_ns: float | None = None,
) -> BulkTandemTimes:
    """The seed's two-stage tandem (Fig. 8): the bus of :func:`bulk_transfer`, then the
    device-side FIFO buffer and one server with service times ``s2`` (ns).

    ``capacity2=None``: an unbounded device buffer. Otherwise it has ``capacity2`` places (not
    counting the server) and a finished transfer is held on the bus, which starts nothing else,
    until all of its items fit (``bulk_size <= capacity2 + 1`` is required).
    """
    a, b, lo, tr = _params(arrive, bulk_size, min_batch, transfer_ns)
    sv = as_durations("s2", s2, a.size)
    if a.size == 0:
        e = a.copy()
        return BulkTandemTimes(e, e, e, e, e)
    end = _end(a, end_ns)
    if capacity2 is None:
        start1, done1 = bulk_transfer(
            a, b, tr, min_batch=lo, per_item_ns=per_item_ns, timeout_ns=timeout_ns, end_ns=end
        )
        deliver = done1
        depart = _lindley(deliver, sv)
    else:
        cap = check_capacity("capacity2", capacity2)
        if b > cap + 1:
            raise ModelInputError(
                f"bulk_size={b} cannot fit a device buffer of capacity2={cap} (+1 server)"
            )
        start1, done1, deliver, depart = _event_loop(
            a, b, lo, tr, per_item_ns, timeout_ns, end, sv, cap
        )
    start2 = np.maximum(deliver, _shift(depart, 1))
    return BulkTandemTimes(start1, done1, deliver, start2, depart)
