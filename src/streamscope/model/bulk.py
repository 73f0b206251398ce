"""The bus as a bulk server, alone and in the paper's two-stage tandem: item arrival times (ns)
and transfer/service times in, per-item times through each stage out (host buffer, bus, device).
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import NamedTuple, cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.model._inputs import (
    F64,
    ModelInputError,
    as_durations,
    as_times,
    check_capacity,
    check_sorted,
)
from streamscope.model.recursions import KERNELS, lindley, shift

__all__ = ["BulkTandemTimes", "bulk_transfer", "tandem_bulk"]

#: The compiled per-item times (None where the extension was not built, or was built before
#: they were).
TRANSFER_ITEMS = getattr(KERNELS, "transfer_items", None)


class BulkTandemTimes(NamedTuple):
    """Per-item times (ns). Host buffer: arrive..start1; bus: start1..deliver; device buffer:
    deliver..start2; device server: start2..depart; the whole virtual queue: arrive..depart."""

    start1: F64  #: its transfer starts (leaves the host buffer)
    done1: F64  #: its transfer ends
    deliver: F64  #: enters the device buffer (= done1 unless the bus is blocked by a full buffer)
    start2: F64  #: device service starts
    depart: F64  #: leaves the device server


@dataclass(frozen=True, slots=True)
class _BusRule:
    """The bus parameters of :func:`bulk_transfer`, checked (ns)."""

    bulk_size: int  #: b: the most items per transfer
    min_batch: int  #: a: the quorum
    transfer_ns: F64  #: one fixed time per possible transfer (per item)
    per_item_ns: float
    timeout_ns: float  #: in [0, inf]
    latency_ns: float


def _check_ns(name: str, value: float, *, inf_ok: bool = False) -> float:
    v = float(value)
    if not (v >= 0.0 and (inf_ok or v < math.inf)):
        allowed = "in [0, inf]" if inf_ok else "finite and >= 0"
        raise ModelInputError(f"{name} must be {allowed} ns, got {value!r}")
    return v


def _rule(
    arrive: ArrayLike,
    bulk_size: int,
    min_batch: int | None,
    transfer_ns: ArrayLike,
    per_item_ns: float,
    timeout_ns: float,
    latency_ns: float,
) -> tuple[F64, _BusRule]:
    """The sorted arrivals and the checked bus rule, or a ModelInputError."""
    a = as_times("arrive", arrive)
    check_sorted("arrive", a)
    if int(bulk_size) != bulk_size or bulk_size < 1:
        raise ModelInputError(f"bulk_size must be an integer >= 1, got {bulk_size!r}")
    lo = int(bulk_size) if min_batch is None else int(min_batch)
    if not 1 <= lo <= bulk_size:
        raise ModelInputError(f"min_batch must be in 1..bulk_size={bulk_size}, got {min_batch!r}")
    return a, _BusRule(
        bulk_size=int(bulk_size),
        min_batch=lo,
        transfer_ns=as_durations("transfer_ns", transfer_ns, a.size),
        per_item_ns=_check_ns("per_item_ns", per_item_ns),
        timeout_ns=_check_ns("timeout_ns", timeout_ns, inf_ok=True),
        latency_ns=_check_ns("latency_ns", latency_ns),
    )


def _end(a: F64, end_ns: float | None) -> float:
    last = float(a[-1])
    if end_ns is None:
        return last
    if not end_ns >= last:
        raise ModelInputError(f"end_ns={end_ns} is before the last arrival at {last} ns")
    return float(end_ns)


def _quorum_fast(a: F64, rule: _BusRule, end: float) -> tuple[F64, F64]:
    """a = b and no timeout: batches are fixed blocks of b items, so the bus is a Lindley queue
    whose "arrivals" are the b-th arrival of each block (the last, partial block at ``end``)."""
    n, b = a.size, rule.bulk_size
    nb = -(-n // b)
    trigger = a[b - 1 :: b]
    sizes = np.full(nb, float(b))
    if trigger.size < nb:
        trigger = np.append(trigger, max(end, float(a[-1])))
        sizes[-1] = n - (nb - 1) * b
    done_b = lindley(trigger, rule.transfer_ns[:nb] + rule.per_item_ns * sizes)
    start_b = np.maximum(trigger, shift(done_b, 1))
    return np.repeat(start_b, b)[:n], np.repeat(done_b, b)[:n]


def _floats(x: F64) -> Sequence[float]:
    """``x``'s values as Python floats read on demand (a memoryview; no conversion up front)."""
    return cast("Sequence[float]", np.ascontiguousarray(x, dtype=np.float64).data)


def _flush_points(a: F64, p: int, timeout_ns: float) -> list[int]:
    """Where an inactivity flush may fall: the items ``i >= p`` whose successor arrives more
    than ``timeout_ns`` later, then ``n - 1`` (no successor) and ``n`` (a sentinel)."""
    n = a.size
    if not timeout_ns < math.inf:
        return [n]
    # Same float operations as the reference loop; the last item has no successor.
    big = np.flatnonzero(a[1:] > a[:-1] + timeout_ns)
    return [*big[big >= p].tolist(), n - 1, n]


def _served_in_order(av: Sequence[float], s2v: Sequence[float], p: int) -> list[float]:
    """Device departures of the ``p`` preloaded items: served in order from their arrival."""
    d2: list[float] = []
    d_prev = -math.inf
    for k in range(p):
        d_prev = max(av[k], d_prev) + s2v[k]
        d2.append(d_prev)
    return d2


class _Transfers(NamedTuple):
    """The bus's transfers, one entry each, and the device's departures item by item."""

    first: Sequence[int] | NDArray[np.int64]  #: its first item
    start: Sequence[float] | F64
    deliver: Sequence[float] | F64  #: when its items reach the device buffer (with one)
    depart: Sequence[float] | F64  #: device departures, per item (with a device buffer)


def _transfers(a: F64, p: int, rule: _BusRule, end: float, s2: F64 | None, cap2: int) -> _Transfers:
    """The bus's transfers: compiled (``KERNELS.bulk_transfers``: the same operations in the
    same order) where it was built, else :func:`transfers_py`."""
    if KERNELS is None:
        return transfers_py(a, p, rule, end, s2, cap2)
    n = a.size
    flush = np.asarray(_flush_points(a, p, rule.timeout_ns), dtype=np.int64)
    first, start = np.empty(n, dtype=np.int64), np.empty(n)
    deliver, depart = np.empty(n), np.empty(n)
    k = KERNELS.bulk_transfers(
        np.ascontiguousarray(a, dtype=np.float64), p, rule.bulk_size, rule.min_batch,
        np.ascontiguousarray(rule.transfer_ns, dtype=np.float64), rule.per_item_ns,
        rule.timeout_ns, rule.latency_ns, end, flush,
        None if s2 is None else np.ascontiguousarray(s2, dtype=np.float64), cap2,
        first, start, deliver, depart,
    )  # fmt: skip
    held = s2 is not None  # deliveries and departures exist only with a device buffer
    return _Transfers(first[:k], start[:k], deliver[:k] if held else [], depart if held else [])


def transfers_py(
    a: F64, p: int, rule: _BusRule, end: float, s2: F64 | None, cap2: int
) -> _Transfers:
    """The bus rule of :func:`bulk_transfer`, O(1) Python work per transfer.

    Per transfer: the quorum time is one lookup. The inactivity flush needs the first waiting
    item ``i`` whose successor arrives both more than ``timeout_ns`` later and after the bus is
    free: the first ``i >= max(h, r - 1)`` (``r``: the first item arriving after the bus is free,
    one bisection) among the precomputed, usually sparse, :func:`_flush_points`; a pointer into
    them, which only moves forward, skips the search whenever none lies in the batch window. The
    batch size is one bisection. Arrays are read through memoryviews (Python floats, no
    conversion of the whole array). With ``s2`` the device departures are needed inside the
    loop (hold-on-full): each batch's are one ``itertools.accumulate`` (sequential adds in C).
    """
    n, b, lo, tmo, lat = a.size, rule.bulk_size, rule.min_batch, rule.timeout_ns, rule.latency_ns
    av, trv, per = _floats(a), _floats(rule.transfer_ns), rule.per_item_ns
    flush, finite, ptr = _flush_points(a, p, tmo), tmo < math.inf, 0
    blocking = s2 is not None
    s2v = _floats(s2 if s2 is not None else np.empty(0))
    d2: list[float] = _served_in_order(av, s2v, p) if blocking else []
    firsts: list[int] = []
    starts: list[float] = []
    delivers: list[float] = []
    out = _Transfers(firsts, starts, delivers, d2)
    d_prev = d2[-1] if d2 else -math.inf
    free, h, j = -math.inf, p, 0
    while h < n:
        q = h + lo - 1
        bound = q if q < n else n
        t = max(av[q] if q < n else end, free)
        if finite:
            while flush[ptr] < h:
                ptr += 1
            if flush[ptr] < bound:
                r = bisect_right(av, free, h, bound + 1 if bound < n else n)
                i = flush[bisect_left(flush, r - 1, ptr)] if r - 1 > h else flush[ptr]
                if i < bound:
                    t = min(t, max(av[i] + tmo, free))
        hb = h + b
        m = bisect_right(av, t, h, hb if hb < n else n) - h
        fin = t + trv[j] + per * m
        if blocking:
            arr = got = fin + lat
            if h + m - cap2 - 2 >= 0 and d2[h + m - cap2 - 2] > arr:
                got = d2[h + m - cap2 - 2]
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
    return out


def _batches(
    a: F64, p: int, rule: _BusRule, end: float, s2: F64 | None = None, cap2: int = 0
) -> tuple[F64, F64, F64, F64 | None]:
    """The bus of :func:`bulk_transfer`, item by item.

    In: sorted arrivals ``a`` (ns), items ``0..p-1`` preloaded (already in the device buffer at
    their arrival time; the bus takes ``p..n-1``), the bus rule, and with ``s2`` a device
    buffer of ``cap2`` places. Out: start1, done1, deliver and, with ``s2``, the device
    departures; equal, bit for bit, to :func:`~streamscope.model.bulk_reference.
    event_loop_reference`. The transfers come from :func:`_transfers`; per-item times from
    its transfer's (:func:`items_py`, or compiled where built: ``TRANSFER_ITEMS``).
    """
    tr = _transfers(a, p, rule, end, s2, cap2)
    held = s2 is not None
    if TRANSFER_ITEMS is None:
        return items_py(a, p, rule, tr, held)
    n = a.size
    start1, done1, deliver = np.empty(n), np.empty(n), np.empty(n)
    TRANSFER_ITEMS(
        np.ascontiguousarray(a, dtype=np.float64), p, np.ascontiguousarray(tr.first, dtype=np.int64),
        np.ascontiguousarray(tr.start, dtype=np.float64),
        np.ascontiguousarray(tr.deliver, dtype=np.float64) if held else None,
        np.ascontiguousarray(rule.transfer_ns, dtype=np.float64), rule.per_item_ns,
        rule.latency_ns, start1, done1, deliver,
    )  # fmt: skip
    depart = np.asarray(tr.depart, dtype=np.float64) if held else None
    return start1, done1, deliver, depart


def items_py(
    a: F64, p: int, rule: _BusRule, tr: _Transfers, held: bool
) -> tuple[F64, F64, F64, F64 | None]:
    """:func:`_batches`' per-item times from the transfers ``tr`` (``held``: with a device
    buffer), by ``np.repeat``: the compiled ``transfer_items``' reference, and what runs where
    it was not built."""
    n = a.size
    first = np.asarray(tr.first, dtype=np.int64)
    sizes = np.diff(first, append=n)
    t1 = np.asarray(tr.start, dtype=np.float64)
    # The loop's fin, recomputed with the same float operations in the same order.
    fin_b = t1 + rule.transfer_ns[: t1.size] + rule.per_item_ns * sizes.astype(np.float64)
    head = a[:p]
    start1 = np.concatenate((head, np.repeat(t1, sizes)))
    done1 = np.concatenate((head, np.repeat(fin_b, sizes)))
    if held:
        got_b = np.asarray(tr.deliver, dtype=np.float64)
        deliver = np.concatenate((head, np.repeat(got_b, sizes)))
        return start1, done1, deliver, np.asarray(tr.depart, dtype=np.float64)
    deliver = np.concatenate((head, np.repeat(fin_b + rule.latency_ns, sizes)))
    return start1, done1, deliver, None


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
    a, rule = _rule(arrive, bulk_size, min_batch, transfer_ns, per_item_ns, timeout_ns, 0.0)
    if a.size == 0:
        return a.copy(), a.copy()
    return _bus(a, 0, rule, _end(a, end_ns))


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
    """The paper's two-stage tandem (Fig. 8): the bus of :func:`bulk_transfer`, then the
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
    a, rule = _rule(arrive, bulk_size, min_batch, transfer_ns, per_item_ns, timeout_ns, latency_ns)
    sv = as_durations("s2", s2, a.size)
    if int(preloaded) != preloaded or not 0 <= preloaded <= a.size:
        raise ModelInputError(
            f"preloaded must be an integer in 0..{a.size} (the number of items), got {preloaded!r}"
        )
    if a.size == 0:
        e = a.copy()
        return BulkTandemTimes(e, e, e, e, e)
    end = _end(a, end_ns)
    if capacity2 is None:
        start1, done1, deliver, depart = _unbounded(a, int(preloaded), rule, end, sv)
    else:
        start1, done1, deliver, depart = _bounded(a, int(preloaded), rule, end, sv, capacity2)
    start2 = np.maximum(deliver, shift(depart, 1))
    return BulkTandemTimes(start1, done1, deliver, start2, depart)


def _bus(a: F64, p: int, rule: _BusRule, end: float) -> tuple[F64, F64]:
    """start1 and done1 per item for a bus that never waits for the device side (items
    ``0..p-1`` preloaded: they skip it)."""
    if p == a.size:
        c = a.copy()
        return c, c
    if rule.min_batch == rule.bulk_size and rule.timeout_ns == math.inf:
        bs, bd = _quorum_fast(a[p:], rule, end)
        return (np.concatenate((a[:p], bs)), np.concatenate((a[:p], bd))) if p else (bs, bd)
    start1, done1, _, _ = _batches(a, p, rule, end)
    return start1, done1


def _unbounded(a: F64, p: int, rule: _BusRule, end: float, sv: F64) -> tuple[F64, F64, F64, F64]:
    """:func:`tandem_bulk` with an unbounded device buffer: the bus never waits for the device,
    whose server is then a Lindley queue of the deliveries."""
    start1, done1 = _bus(a, p, rule, end)
    lat = rule.latency_ns
    deliver = done1 + lat if lat else done1
    if p and lat:
        deliver[:p] = a[:p]
    return start1, done1, deliver, lindley(deliver, sv)


def _bounded(
    a: F64, p: int, rule: _BusRule, end: float, sv: F64, capacity2: int
) -> tuple[F64, F64, F64, F64]:
    """:func:`tandem_bulk` with a device buffer of ``capacity2`` places: a transfer that does
    not fit holds the bus, so the bus and the device are simulated together."""
    cap = check_capacity("capacity2", capacity2)
    if rule.bulk_size > cap + 1:
        raise ModelInputError(
            f"bulk_size={rule.bulk_size} cannot fit a device buffer of capacity2={cap} (+1 server)"
        )
    start1, done1, deliver, d2 = _batches(a, p, rule, end, sv, cap)
    assert d2 is not None
    return start1, done1, deliver, d2
