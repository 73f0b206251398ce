"""Invariants of the queue models on small random inputs: FIFO order, causality, capacity
bounds, occupancy totals, and the vectorised paths agreeing with the exact loops."""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from streamscope.model import (
    blocking_fifo,
    bulk_transfer,
    lindley_fifo,
    occupancy_from_events,
    tandem_blocking,
    tandem_bulk,
)
from streamscope.model.bulk_reference import event_loop_reference as _event_loop_reference
from streamscope.model.recursions import lindley as _lindley

F64 = NDArray[np.float64]
durations = st.lists(st.floats(0.0, 10.0), min_size=1, max_size=60)
EPS = 1e-9


def _pair(draw: st.DrawFn) -> tuple[F64, F64]:
    gaps = draw(durations)
    serv = draw(st.lists(st.floats(0.0, 10.0), min_size=len(gaps), max_size=len(gaps)))
    return np.asarray(gaps), np.asarray(serv)


pairs = st.composite(_pair)()


def _max_level(arrive: F64, depart: F64) -> int:
    levels, ns = occupancy_from_events(arrive, depart, float(arrive.min()), float(depart.max()))
    assert (ns >= 0).all()
    return int(levels[-1])


@settings(max_examples=100, deadline=None)
@given(pairs)
def test_lindley_fifo_and_causal(p: tuple[F64, F64]) -> None:
    gaps, s = p
    arrive = np.cumsum(gaps)
    depart = lindley_fifo(arrive, s)
    assert (np.diff(depart) >= s[1:] - EPS).all()  # FIFO, one at a time
    assert (depart >= arrive + s - EPS).all()


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(0, 5))
def test_blocking_fifo_bounds(p: tuple[F64, F64], cap: int) -> None:
    gaps, s = p
    insert, remove, depart = blocking_fifo(gaps, s, cap)
    ready = np.concatenate(([0.0], insert[:-1])) + gaps
    assert (insert >= ready - EPS).all()
    assert (remove >= insert).all()
    assert (depart >= remove + s - EPS).all()
    assert (np.diff(depart) >= s[1:] - EPS).all()
    assert _max_level(insert, remove) <= cap  # the buffer itself
    assert _max_level(ready, depart) <= cap + 2  # buffer + server + held item
    loop = blocking_fifo(gaps, s, cap, max_sweeps=0)
    np.testing.assert_allclose(depart, loop[2], rtol=1e-9, atol=1e-6)


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(0, 4))
def test_tandem_blocking_bounds(p: tuple[F64, F64], cap: int) -> None:
    gaps, s = p
    arrive = np.cumsum(gaps)
    s1 = s[::-1].copy()
    t = tandem_blocking(arrive, s1, s, cap)
    assert (t.leave1 >= t.start1 + s1 - EPS).all()
    assert (t.depart >= t.start2 + s - EPS).all()
    assert (np.diff(t.depart) >= 0).all()
    assert _max_level(t.leave1, t.start2) <= cap
    loop = tandem_blocking(arrive, s1, s, cap, max_sweeps=0)
    np.testing.assert_allclose(t.depart, loop.depart, rtol=1e-9, atol=1e-6)


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(1, 5), st.sampled_from([math.inf, 0.0, 3.0]), st.booleans())
def test_bulk_bounds(p: tuple[F64, F64], b: int, timeout: float, greedy: bool) -> None:
    gaps, s = p
    s = s + 0.5  # positive transfers: a batch is then the set of items sharing a start
    arrive = np.cumsum(gaps)
    lo = 1 if greedy else b
    start, _ = bulk_transfer(arrive, b, s, min_batch=lo, timeout_ns=timeout)
    assert (start >= arrive).all()
    assert (np.diff(start) >= 0).all()
    _, sizes = np.unique(start, return_counts=True)
    assert sizes.max() <= b
    if timeout == math.inf and not greedy:  # fixed blocks: only the last may be short
        assert (sizes[:-1] == b).all()
    t = tandem_bulk(arrive, b, s, timeout, s[::-1].copy(), b + 1, min_batch=lo)
    assert _max_level(t.deliver, t.start2) <= b + 1
    assert (t.deliver >= t.done1).all()
    assert (np.diff(t.depart) >= 0).all()


@settings(max_examples=100, deadline=None)
@given(pairs, st.floats(-5.0, 50.0), st.floats(0.0, 100.0))
def test_occupancy_total_is_window(p: tuple[F64, F64], t0: float, width: float) -> None:
    gaps, s = p
    arrive = np.cumsum(gaps)
    depart = lindley_fifo(arrive, s)
    _, ns = occupancy_from_events(arrive, depart, t0, t0 + width)
    assert (ns >= 0).all()
    assert math.isclose(float(ns.sum()), width, rel_tol=1e-9, abs_tol=1e-9)


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(1, 5), st.floats(0.0, 2.0))
def test_bulk_fast_path_equals_event_loop(p: tuple[F64, F64], b: int, per_item: float) -> None:
    """a = b without timeout takes the vectorised path; a timeout that never fires, or a
    device buffer too large to ever fill, takes the per-transfer loop: both must agree."""
    gaps, s = p
    arrive = np.cumsum(gaps)
    fast = tandem_bulk(arrive, b, s, math.inf, s[::-1].copy(), per_item_ns=per_item)
    loop = tandem_bulk(arrive, b, s, 1e300, s[::-1].copy(), 10**9, per_item_ns=per_item)
    for x, y in zip(fast, loop, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-9)


# Gaps and transfer times on a small grid make ties (simultaneous arrivals, a gap equal to the
# timeout, a transfer ending as an item arrives) common; the floats cover everything else.
grid_or_float = st.one_of(st.sampled_from([0.0, 1.0, 2.0, 3.0, 5.0]), st.floats(0.0, 10.0))


class BulkCase(NamedTuple):
    arrive: F64
    b: int
    lo: int
    tr: F64
    s2: F64
    timeout: float
    per_item: float
    cap2: int | None
    end: float | None
    latency: float
    preloaded: int


@st.composite
def bulk_cases(draw: st.DrawFn) -> BulkCase:
    n = draw(st.integers(1, 60))

    def column() -> F64:
        return np.asarray(draw(st.lists(grid_or_float, min_size=n, max_size=n)))

    arrive = np.cumsum(column())
    b = draw(st.integers(1, 6))
    end_extra = draw(st.one_of(st.none(), st.sampled_from([0.0, 2.0, 7.5])))
    return BulkCase(
        arrive=arrive,
        b=b,
        lo=draw(st.integers(1, b)),
        tr=column(),
        s2=column(),
        timeout=draw(st.sampled_from([math.inf, 0.0, 1.0, 2.0, 2.5, 3.0, 1e300])),
        per_item=draw(st.sampled_from([0.0, 0.5, 1.25])),
        cap2=draw(st.one_of(st.none(), st.integers(max(b - 1, 0), b + 3))),
        end=None if end_extra is None else float(arrive[-1]) + end_extra,
        latency=draw(st.sampled_from([0.0, 1.0, 2.5, 40.0])),
        preloaded=draw(st.integers(0, min(n, 3))),
    )


@settings(max_examples=400, deadline=None)
@given(bulk_cases())
def test_bulk_transfers_equal_the_reference_loop(c: BulkCase) -> None:
    """The per-transfer loop (+ numpy) gives exactly the item-by-item event loop's times, for
    every rule (quorum, timeout, end of stream), latency, preloaded items and device buffer."""
    a, b, lo, cap2 = c.arrive, c.b, c.lo, c.cap2
    t = tandem_bulk(
        a, b, c.tr, c.timeout, c.s2, cap2, min_batch=lo, per_item_ns=c.per_item, end_ns=c.end,
        latency_ns=c.latency, preloaded=c.preloaded,
    )  # fmt: skip
    end = float(a[-1]) if c.end is None else c.end
    s2 = None if cap2 is None else c.s2
    ref = _event_loop_reference(
        a, b, lo, c.tr, c.per_item, c.timeout, end, s2, cap2 or 0, c.latency, c.preloaded
    )
    assert np.array_equal(t.start2, np.maximum(t.deliver, np.append(-np.inf, t.depart[:-1])))
    if cap2 is None and lo == b and c.timeout == math.inf:
        # The fixed-block path (max-plus sums, not the loop), as before the loop was rewritten.
        for x, y in zip(t[:3], ref[:3], strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-9)
        return
    assert np.array_equal(t.start1, ref[0])
    assert np.array_equal(t.done1, ref[1])
    assert np.array_equal(t.deliver, ref[2])
    assert np.array_equal(t.depart, _lindley(ref[2], c.s2) if cap2 is None else ref[3])
    if c.preloaded == 0 and c.latency == 0.0:
        start, done = bulk_transfer(
            a, b, c.tr, min_batch=lo, per_item_ns=c.per_item, timeout_ns=c.timeout, end_ns=c.end
        )
        bus = _event_loop_reference(a, b, lo, c.tr, c.per_item, c.timeout, end, None, 0)
        # The same sums in another order: equal to the last few ulps (hypothesis found a
        # transfer time of 1e-13 that rounds differently).
        np.testing.assert_allclose(start, bus[0], rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(done, bus[1], rtol=1e-12, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(bulk_cases())
def test_bulk_latency_is_pipelined(c: BulkCase) -> None:
    """Latency delays delivery, never the bus (unbounded device buffer); with a finite one the
    device never holds more than capacity2 + 1 items and every stage stays FIFO."""
    a, b, lo, p, lat, s2 = c.arrive, c.b, c.lo, c.preloaded, c.latency, c.s2
    free = tandem_bulk(a, b, c.tr, c.timeout, s2, min_batch=lo, preloaded=p)
    late = tandem_bulk(a, b, c.tr, c.timeout, s2, min_batch=lo, latency_ns=lat, preloaded=p)
    assert np.array_equal(free.start1, late.start1) and np.array_equal(free.done1, late.done1)
    assert np.array_equal(late.deliver[p:], late.done1[p:] + lat)
    assert np.array_equal(late.deliver[:p], a[:p])
    if p == 0:  # preloaded items are served first, with or without latency: no pure shift
        np.testing.assert_allclose(late.depart, free.depart + lat, rtol=1e-12, atol=1e-9)
    cap2 = b  # one more place than the smallest allowed (b - 1)
    t = tandem_bulk(a, b, c.tr, c.timeout, s2, cap2, min_batch=lo, latency_ns=lat, preloaded=p)
    assert (t.deliver[p:] >= t.done1[p:] + lat).all()
    assert (np.diff(t.deliver) >= 0).all() and (np.diff(t.depart) >= 0).all()
    assert (np.diff(t.start1) >= 0).all()
    assert (t.depart >= t.start2 + s2 - EPS).all()
    assert _max_level(t.deliver, t.depart) <= max(cap2 + 1, p)
    # One transfer at a time: a transfer starts once the previous one has ended.
    first = np.flatnonzero(np.diff(t.start1[p:], prepend=-np.inf) > 0) + p
    assert (t.start1[first[1:]] >= t.done1[first[:-1]]).all()


@settings(max_examples=100, deadline=None)
@given(pairs, st.integers(0, 6))
def test_the_tandem_loop_compiled_in_python_and_swept_agree(p: tuple[F64, F64], cap: int) -> None:
    """The blocking tandem's per-customer loop: compiled (where built) bit for bit the Python
    loop; the vectorised sweeps (what runs where it was not built) at their fixed point the
    same up to rounding."""
    from streamscope.model import recursions as r

    gaps, s = p
    arrive, s1 = np.cumsum(gaps), s[::-1].copy()
    ref = r.tandem_loop_py(arrive, s1, s, cap)
    fast = r._tandem_loop(arrive, s1, s, cap)
    assert all(np.array_equal(x, y) for x, y in zip(fast, ref, strict=True))
    swept = r._tandem_sweeps(arrive, s1, s, cap, max_sweeps=arrive.size + 2)
    assert swept is not None
    for x, y in zip(swept, ref, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-9, atol=1e-6)


def test_the_tandem_loop_runs_compiled_here() -> None:
    """Built by the install (setup.py) on a machine with a compiler, as this one has."""
    from streamscope.model import recursions as r

    assert r.COMPILED


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 32),
    st.sampled_from([math.inf, 0.0, 700.0]), st.booleans(),
)  # fmt: skip
def test_the_bus_transfers_compiled_and_in_python_agree(
    seed: int, n: int, b: int, timeout: float, held: bool
) -> None:
    """The bulk bus's transfers (the virtual queues' model): the compiled loop bit for bit
    the Python one, quorum, inactivity flush, preloaded items and a full device buffer alike."""
    from streamscope.model.bulk import _rule, _transfers, transfers_py

    rng = np.random.default_rng(seed)
    a = np.cumsum(rng.exponential(rng.uniform(10, 2000), n))
    lo = int(rng.integers(1, b + 1))
    a, rule = _rule(a, b, lo, rng.uniform(100, 5000), 10.0, timeout, float(rng.uniform(0, 3000)))
    p = int(rng.integers(0, min(n, 5) + 1))
    s2 = rng.exponential(500, n) if held else None
    cap2 = int(rng.integers(max(b - 1, 0), b + 20))
    end = float(a[-1]) + 1000.0
    fast = _transfers(a, p, rule, end, s2, cap2)
    ref = transfers_py(a, p, rule, end, s2, cap2)
    for x, y in zip(fast, ref, strict=True):
        assert np.array_equal(np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64))
