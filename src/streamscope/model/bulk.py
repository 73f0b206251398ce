"""The bus as a bulk server, alone and in the seed's two-stage tandem: item arrival times (ns)
and transfer/service times in, per-item times through each stage out (host buffer, bus, device).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple, cast

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


def _floats(x: F64) -> Sequence[float]:
    """``x``'s values as Python floats read on demand (a memoryview; no conversion up front)."""
    return cast("Sequence[float]", np.ascontiguousarray(x, dtype=np.float64).data)


def _batches(
    a: F64,
    p: int,
    b: int,
    lo: int,
    tr: F64,
    per_item_ns: float,
    timeout_ns: float,
    end: float,
    latency_ns: float,
    s2: F64 | None,
    cap2: int,
) -> tuple[F64, F64, F64, F64 | None]:
    """The bus rule of :func:`bulk_transfer`, O(1) Python work per transfer, item times by numpy.

    In: sorted arrivals ``a`` (ns), items ``0..p-1`` preloaded (already in the device buffer at
    their arrival time; the bus takes ``p..n-1``), the bus parameters, and with ``s2`` a device
    buffer of ``cap2`` places. Out: start1, done1, deliver and, with ``s2``, the device
    departures; equal, bit for bit, to :func:`_event_loop_reference`.

    Per transfer: the quorum time is one lookup. The inactivity flush needs the first waiting
    item ``i`` whose successor arrives both more than ``timeout_ns`` later and after the bus is
    free: the first ``i >= max(h, r - 1)`` (``r``: the first item arriving after the bus is free,
    one bisection) among the precomputed, usually sparse, indices with
    ``a[i+1] > a[i] + timeout_ns``; a pointer into them, which only moves forward, skips the
    search whenever none lies in the batch window. The batch size is one bisection; per-item
    times then come from ``np.repeat``. Arrays are read through memoryviews (Python floats,
    no conversion of the whole array). With ``s2`` the device departures are needed inside the
    loop (hold-on-full): each batch's are one ``itertools.accumulate`` (sequential adds in C).
    """
    n = a.size
    av = _floats(a)
    trv = _floats(tr)
    finite = timeout_ns < math.inf
    flush: list[int] = [n]
    if finite:
        # Same float operations as the reference loop; the last item has no successor.
        big = np.flatnonzero(a[1:] > a[:-1] + timeout_ns)
        flush = [*big[big >= p].tolist(), n - 1, n]
    ptr = 0
    blocking = s2 is not None
    s2v = _floats(s2 if s2 is not None else np.empty(0))
    d2: list[float] = []
    d_prev = -math.inf
    if blocking:
        for k in range(p):  # preloaded items: served in order from their arrival
            d_prev = max(av[k], d_prev) + s2v[k]
            d2.append(d_prev)
    firsts: list[int] = []
    starts: list[float] = []
    delivers: list[float] = []
    free = -math.inf
    h = p
    j = 0
    while h < n:
        q = h + lo - 1
        t: float
        if q < n:
            t = av[q]
            bound = q
        else:
            t = end
            bound = n
        t = max(t, free)
        if finite:
            while flush[ptr] < h:
                ptr += 1
            if flush[ptr] < bound:
                r = bisect_right(av, free, h, bound + 1 if bound < n else n)
                i = flush[bisect_left(flush, r - 1, ptr)] if r - 1 > h else flush[ptr]
                if i < bound:
                    t = min(t, max(av[i] + timeout_ns, free))
        hb = h + b
        m = bisect_right(av, t, h, hb if hb < n else n) - h
        fin = t + trv[j] + per_item_ns * m
        if blocking:
            arr = fin + latency_ns
            got = arr
            if h + m - cap2 - 2 >= 0:
                held = d2[h + m - cap2 - 2]
                if held > arr:
                    got = held
            free = got if got > arr else fin  # a held transfer holds the bus until delivered
            d2.extend(accumulate(s2v[h + 1 : h + m], initial=max(got, d_prev) + s2v[h]))
            d_prev = d2[-1]
            delivers.append(got)
        else:
            free = fin
        firsts.append(h)
        starts.append(t)
        h += m
        j += 1
    first = np.asarray(firsts, dtype=np.int64)
    sizes = np.diff(first, append=n)
    t1 = np.asarray(starts, dtype=np.float64)
    # The loop's fin, recomputed with the same float operations in the same order.
    fin_b = t1 + tr[: t1.size] + per_item_ns * sizes.astype(np.float64)
    head = a[:p]
    start1 = np.concatenate((head, np.repeat(t1, sizes)))
    done1 = np.concatenate((head, np.repeat(fin_b, sizes)))
    if blocking:
        got_b = np.asarray(delivers, dtype=np.float64)
        deliver = np.concatenate((head, np.repeat(got_b, sizes)))
        return start1, done1, deliver, np.asarray(d2, dtype=np.float64)
    deliver = np.concatenate((head, np.repeat(fin_b + latency_ns, sizes)))
    return start1, done1, deliver, None


def _event_loop_reference(
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
    """Reference for :func:`_batches` (tests only): the original event loop, one transfer per
    iteration plus per-item steps, extended by latency and preloaded items.

    Returns start1, done1, deliver and (when ``s2`` is given) depart, all item by item.
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
    for k in range(preloaded):
        start[k] = done[k] = deliver[k] = av[k]
        if s2 is not None:
            d_prev = max(av[k], d_prev) + s2v[k]
            d2[k] = d_prev
    h = preloaded
    j = 0
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


def _check_ns(name: str, value: float, *, inf_ok: bool = False) -> float:
    v = float(value)
    if not (v >= 0.0 and (inf_ok or v < math.inf)):
        allowed = "in [0, inf]" if inf_ok else "finite and >= 0"
        raise ModelInputError(f"{name} must be {allowed} ns, got {value!r}")
    return v


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
    ``timeout_ns`` is in ``[0, inf]``, ``per_item_ns`` finite and ``>= 0``.
    """
    a, b, lo, tr = _params(arrive, bulk_size, min_batch, transfer_ns)
    per = _check_ns("per_item_ns", per_item_ns)
    tmo = _check_ns("timeout_ns", timeout_ns, inf_ok=True)
    if a.size == 0:
        return a.copy(), a.copy()
    end = _end(a, end_ns)
    if lo == b and tmo == math.inf:
        return _quorum_fast(a, b, tr, per, end)
    start, done, _, _ = _batches(a, 0, b, lo, tr, per, tmo, end, 0.0, None, 0)
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
    latency_ns: float = 0.0,
    preloaded: int = 0,
) -> BulkTandemTimes:
    """The seed's two-stage tandem (Fig. 8): the bus of :func:`bulk_transfer`, then the
    device-side FIFO buffer and one server with service times ``s2`` (ns).

    In: sorted item arrival times ``arrive`` (ns), the bus parameters of :func:`bulk_transfer`,
    one device service time per item ``s2``. Out: :class:`BulkTandemTimes`, one entry per item.

    ``latency_ns``: a transfer's items reach the device buffer ``latency_ns`` after it ends
    (``deliver = done1 + latency_ns``). The bus is busy only for the transfer itself: the
    latency is pipelined, so the next transfer may start while the previous one is in flight.

    ``capacity2=None``: an unbounded device buffer. Otherwise it has ``capacity2`` places (not
    counting the server; ``bulk_size <= capacity2 + 1`` is required) and a transfer whose items
    do not all fit when they arrive (at ``done1 + latency_ns``) is held on the bus until they
    do: its items are delivered once item ``last - capacity2 - 1`` has departed, and the bus
    starts nothing else before that delivery (so under back-pressure the latency costs bus
    time; a transfer that fits on arrival frees the bus at ``done1``).

    ``preloaded``: the first ``preloaded`` items are already in the device buffer at their
    arrival time (a frame that starts with a non-empty device side): they skip the bus
    (``start1 = done1 = deliver = arrive``) and are served first, in order.
    """
    a, b, lo, tr = _params(arrive, bulk_size, min_batch, transfer_ns)
    sv = as_durations("s2", s2, a.size)
    per = _check_ns("per_item_ns", per_item_ns)
    tmo = _check_ns("timeout_ns", timeout_ns, inf_ok=True)
    lat = _check_ns("latency_ns", latency_ns)
    if int(preloaded) != preloaded or not 0 <= preloaded <= a.size:
        raise ModelInputError(
            f"preloaded must be an integer in 0..{a.size} (the number of items), got {preloaded!r}"
        )
    p = int(preloaded)
    if a.size == 0:
        e = a.copy()
        return BulkTandemTimes(e, e, e, e, e)
    end = _end(a, end_ns)
    if capacity2 is None:
        if p == a.size:
            start1 = done1 = a.copy()
        elif lo == b and tmo == math.inf:
            bs, bd = _quorum_fast(a[p:], b, tr, per, end)
            start1, done1 = np.concatenate((a[:p], bs)), np.concatenate((a[:p], bd))
        else:
            start1, done1, _, _ = _batches(a, p, b, lo, tr, per, tmo, end, 0.0, None, 0)
        deliver = done1 + lat if lat else done1
        if p and lat:
            deliver[:p] = a[:p]
        depart = _lindley(deliver, sv)
    else:
        cap = check_capacity("capacity2", capacity2)
        if b > cap + 1:
            raise ModelInputError(
                f"bulk_size={b} cannot fit a device buffer of capacity2={cap} (+1 server)"
            )
        start1, done1, deliver, d2 = _batches(a, p, b, lo, tr, per, tmo, end, lat, sv, cap)
        assert d2 is not None
        depart = d2
    start2 = np.maximum(deliver, _shift(depart, 1))
    return BulkTandemTimes(start1, done1, deliver, start2, depart)
