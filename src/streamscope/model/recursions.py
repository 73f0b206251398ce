"""Single-server and tandem FIFO queues as max-plus recursions: per-customer arrival (or
production) and service times in ns in, per-customer insertion/removal/departure times out.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from streamscope.model._inputs import (
    F64,
    as_durations,
    as_times,
    check_capacity,
    check_sorted,
)

__all__ = ["TandemTimes", "blocking_fifo", "lindley", "lindley_fifo", "shift", "tandem_blocking"]

try:  # the per-customer loops compiled (setup.py); their Python loops below where not built
    from streamscope.model import _kernels  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - an install without a compiler
    _kernels = None
#: The compiled loops (None where they were not built), and whether they are here.
KERNELS: Any = _kernels
COMPILED = _kernels is not None

#: Sweeps of the vectorised fixed-point iteration before falling back to the exact loop. Light
#: blocking (large buffers, low load) converges in one or two; a saturated blocking producer at
#: C <= 4 needed thousands of sweeps for 2e5 items (measured), where the loop takes ~0.65 us/item.
MAX_SWEEPS = 4


def lindley_fifo(arrive: ArrayLike, service: ArrayLike) -> F64:
    """Departure times (ns) of a single-server FIFO queue with an unbounded buffer.

    ``d_k = max(a_k, d_{k-1}) + s_k``. Unrolled with ``S_k = s_0 + ... + s_k``:
    ``d_k = S_k + max_{j<=k} (a_j - S_{j-1})`` (induction: ``d_k - S_k = max(a_k - S_{k-1},
    d_{k-1} - S_{k-1})``), i.e. one cumulative sum and one running maximum. Absolute rounding
    is about ``eps * S_n``.
    """
    a = as_times("arrive", arrive)
    check_sorted("arrive", a)
    s = as_durations("service", service, a.size)
    return lindley(a, s)


def lindley(a: F64, s: F64) -> F64:
    """:func:`lindley_fifo` on arrays already checked (sorted arrivals, one service each)."""
    total = np.cumsum(s)
    out: F64 = total + np.maximum.accumulate(a - (total - s))
    # The unrolled sums can land an ulp below a_k + s_k; never let rounding break causality.
    return np.maximum(out, a + s)


def shift(x: F64, by: int) -> F64:
    """``y_k = x_{k-by}``, and ``-inf`` where ``k < by``."""
    y = np.full(x.size, -np.inf)
    if by < x.size:
        y[by:] = x[: x.size - by]
    return y


def _tandem_sweeps(a: F64, s1: F64, s2: F64, cap: int, max_sweeps: int) -> tuple[F64, F64] | None:
    """Least fixed point of the tandem recursion by monotone vectorised sweeps, or None.

    Given a guess of the station-2 departures ``D``, both stations are scalar Lindley-type
    recursions (a cumulative sum and a running maximum each). Starting from ``D = -inf`` (no
    blocking) every sweep can only raise the times (max and + are monotone, in floats too), so
    the sequence is non-decreasing and stops at the exact solution; each sweep carries the
    effect of one more blocking event along any chain, hence the cap and the loop fallback.
    """
    total1 = np.cumsum(s1)
    d2 = np.full(a.size, -np.inf)
    own = a + s1
    for _ in range(max_sweeps):
        c = np.maximum(own, shift(d2, cap + 1))
        # As in lindley: the unrolled sums can land an ulp below c_k (own time, or the
        # departure that unblocks k), which would show as a zero-length overfull buffer.
        leave1 = np.maximum(total1 + np.maximum.accumulate(c - total1), c)
        new = lindley(leave1, s2)
        if np.array_equal(new, d2):
            return leave1, new
        d2 = new
    return None


def _tandem_loop(a: F64, s1: F64, s2: F64, cap: int) -> tuple[F64, F64]:
    """The same recursion, one customer at a time: compiled (``_kernels.tandem_loop``, the
    same operations in the same order) where it was built, else :func:`tandem_loop_py`.

    A per-customer loop because the recursion has order ``cap + 1`` in max-plus algebra: it
    does not reduce to one running maximum, and a parallel prefix of (cap+2)-square max-plus
    matrices costs O(n cap^3 log n), more than this loop for every size that matters here.
    """
    if _kernels is None:
        return tandem_loop_py(a, s1, s2, cap)
    leave1, d2 = np.empty(a.size), np.empty(a.size)
    _kernels.tandem_loop(
        np.ascontiguousarray(a, dtype=np.float64), np.ascontiguousarray(s1, dtype=np.float64),
        np.ascontiguousarray(s2, dtype=np.float64), cap, leave1, d2,
    )  # fmt: skip
    return leave1, d2


def tandem_loop_py(a: F64, s1: F64, s2: F64, cap: int) -> tuple[F64, F64]:
    """:func:`_tandem_loop` in Python (where the compiled loop was not built; its reference)."""
    n = a.size
    av, s1v, s2v = a.tolist(), s1.tolist(), s2.tolist()
    leave1 = [0.0] * n
    d2 = [0.0] * n
    e_prev = d_prev = -np.inf
    for k in range(n):
        e = max(av[k], e_prev) + s1v[k]
        j = k - cap - 1
        if j >= 0 and d2[j] > e:
            e = d2[j]
        d = max(e, d_prev) + s2v[k]
        leave1[k], d2[k] = e, d
        e_prev, d_prev = e, d
    return np.asarray(leave1, dtype=np.float64), np.asarray(d2, dtype=np.float64)


def _tandem(a: F64, s1: F64, s2: F64, cap: int, max_sweeps: int) -> tuple[F64, F64]:
    if _kernels is not None:  # the compiled loop (~4 ns a customer) beats even one sweep
        return _tandem_loop(a, s1, s2, cap)
    swept = _tandem_sweeps(a, s1, s2, cap, max_sweeps)
    return swept if swept is not None else _tandem_loop(a, s1, s2, cap)


class TandemTimes(NamedTuple):
    """Per-customer times (ns) through a two-station tandem with blocking after service."""

    start1: F64  #: service starts at station 1
    leave1: F64  #: enters the intermediate buffer (>= start1 + s1; later while blocked)
    start2: F64  #: leaves the buffer, service starts at station 2
    depart: F64  #: leaves station 2


def tandem_blocking(
    arrive: ArrayLike,
    s1: ArrayLike,
    s2: ArrayLike,
    capacity: int,
    *,
    max_sweeps: int = MAX_SWEEPS,
) -> TandemTimes:
    """Two FIFO single-server stations, an unbounded queue before station 1 and a buffer of
    ``capacity`` places (not counting station 2's server) between them.

    Blocking after service: station 1 holds a finished customer while the buffer is full and
    starts nobody else meanwhile. Customer ``k`` fits once customer ``k - capacity - 1`` has
    left station 2, so ``leave1_k = max(start1_k + s1_k, depart_{k-capacity-1})``,
    ``start1_k = max(a_k, leave1_{k-1})``, ``depart_k = max(leave1_k, depart_{k-1}) + s2_k``.
    """
    a = as_times("arrive", arrive)
    check_sorted("arrive", a)
    d1 = as_durations("s1", s1, a.size)
    d2s = as_durations("s2", s2, a.size)
    cap = check_capacity("capacity", capacity)
    leave1, depart = _tandem(a, d1, d2s, cap, max_sweeps)
    # A FIFO server's departures are ordered; the vectorised sweeps add in another order than
    # the recursion and can leave a rounding-size inversion (seen: 7e-15 ns), so restore it.
    leave1 = np.maximum.accumulate(leave1)
    depart = np.maximum.accumulate(depart)
    start1 = np.maximum(a, shift(leave1, 1))
    start2 = np.maximum(leave1, shift(depart, 1))
    return TandemTimes(start1, leave1, start2, depart)


def blocking_fifo(
    gaps: ArrayLike, service: ArrayLike, capacity: int, *, max_sweeps: int = MAX_SWEEPS
) -> tuple[F64, F64, F64]:
    """A producer that blocks on a full buffer of ``capacity`` places feeding one server:
    ``(insert, remove, depart)`` per item, in ns from the producer's start at 0.

    The producer makes item ``k`` in ``gaps[k]`` ns once item ``k-1`` is inserted, so it is
    ready at ``ready_k = insert_{k-1} + gaps_k`` (``insert_{-1} = 0``) and, while the buffer is
    full, waits holding it: ``insert_k = max(ready_k, remove_{k-capacity})``. The server takes
    items at ``remove_k = max(insert_k, depart_{k-1})``. Counting buffer + server + the held
    item, with exponential gaps and service this system is exactly M/M/1/(capacity + 2).
    """
    g = as_durations("gaps", gaps, np.asarray(gaps).size)
    s = as_durations("service", service, g.size)
    cap = check_capacity("capacity", capacity)
    # A saturated station 1 (all items present at 0) is exactly the blocking producer.
    insert, depart = _tandem(np.zeros(g.size), g, s, cap, max_sweeps)
    remove = np.maximum(insert, shift(depart, 1))
    return insert, remove, depart
