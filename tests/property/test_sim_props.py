"""Invariants of the queue models on small random inputs: FIFO order, causality, capacity
bounds, occupancy totals, and the vectorised paths agreeing with the exact loops."""

from __future__ import annotations

import math

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
    device buffer too large to ever fill, takes the event loop: both must agree."""
    gaps, s = p
    arrive = np.cumsum(gaps)
    fast = tandem_bulk(arrive, b, s, math.inf, s[::-1].copy(), per_item_ns=per_item)
    loop = tandem_bulk(arrive, b, s, 1e300, s[::-1].copy(), 10**9, per_item_ns=per_item)
    for x, y in zip(fast, loop, strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-9)
