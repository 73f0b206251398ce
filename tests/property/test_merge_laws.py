"""Merge laws for every aggregation spec: associative, commutative, and batching-invariant."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from streamscope.aggregate import (
    Accumulator,
    AggregationSpec,
    Count,
    Duty,
    Histogram,
    Max,
    Mean,
    Min,
    Point,
    Quantiles,
    ScalarPoint,
    Sum,
)
from streamscope.aggregate.accumulators import QuantilesAccumulator

F64 = NDArray[np.float64]
Batch = tuple[F64, F64 | None]

SPECS: list[AggregationSpec] = [
    Count(),
    Sum(),
    Min(),
    Max(),
    Mean(),
    Histogram((-5.0, -1.0, 0.0, 0.5, 3.0, 10.0)),
    Histogram.levels(0, 4),
    Quantiles((0.0, 0.1, 0.5, 0.9, 0.99, 1.0)),
    Duty(),
]
FLOAT_SUMS = {"sum", "mean"}

values_st = st.one_of(
    st.integers(-8, 12).map(float),
    st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    st.just(float("nan")),
)
# integer weights keep every weight total exact, so only sums of values need a tolerance
weight_st = st.integers(0, 1_000_000).map(float)


@st.composite
def batches(draw: st.DrawFn, spec: AggregationSpec, n: int) -> list[Batch]:
    out: list[Batch] = []
    for _ in range(n):
        size = draw(st.integers(0, 12))
        if isinstance(spec, Duty):
            v = draw(st.lists(st.integers(0, len(spec.labels) - 1), min_size=size, max_size=size))
        else:
            v = draw(st.lists(values_st, min_size=size, max_size=size))
        weighted = draw(st.booleans())
        w = draw(st.lists(weight_st, min_size=size, max_size=size)) if weighted else None
        out.append(
            (np.array(v, dtype=np.float64), None if w is None else np.array(w, dtype=np.float64))
        )
    return out


def build(spec: AggregationSpec, *parts: Batch) -> Accumulator:
    acc = spec.create()
    for v, w in parts:
        acc.add_batch(v, w)
    return acc


def merged(*accs: Accumulator) -> Accumulator:
    first = accs[0]
    for a in accs[1:]:
        first.merge(a)
    return first


def float_tolerance(parts: list[Batch]) -> dict[str, float]:
    """Absolute rounding allowance for sums of w·v, which depend on the order of addition."""
    v, w = concat(parts)
    keep = ~np.isnan(v)
    scale = float(np.abs(v[keep] * w[keep]).sum())
    total_w = float(w[keep].sum())
    return {"sum": 1e-13 * scale, "mean": 1e-13 * scale / total_w if total_w else 0.0}


def assert_same(p: Point, q: Point, parts: list[Batch]) -> None:
    if isinstance(p, ScalarPoint) and isinstance(q, ScalarPoint) and p.stat in FLOAT_SUMS:
        if p.value is None or q.value is None:
            assert p.value is q.value
        else:
            assert p.value == pytest.approx(q.value, rel=1e-12, abs=float_tolerance(parts)[p.stat])
    else:
        assert p == q


def spec_and_batches(n: int) -> st.SearchStrategy[tuple[AggregationSpec, list[Batch]]]:
    return st.sampled_from(SPECS).flatmap(lambda s: st.tuples(st.just(s), batches(s, n)))


@settings(max_examples=150, deadline=None)
@given(spec_and_batches(3))
def test_merge_is_associative(case: tuple[AggregationSpec, list[Batch]]) -> None:
    spec, (a, b, c) = case
    left = merged(merged(build(spec, a), build(spec, b)), build(spec, c))
    right = merged(build(spec, a), merged(build(spec, b), build(spec, c)))
    assert_same(left.collect(), right.collect(), [a, b, c])


@settings(max_examples=150, deadline=None)
@given(spec_and_batches(2))
def test_merge_is_commutative(case: tuple[AggregationSpec, list[Batch]]) -> None:
    spec, (a, b) = case
    assert_same(
        merged(build(spec, a), build(spec, b)).collect(),
        merged(build(spec, b), build(spec, a)).collect(),
        [a, b],
    )


def concat(parts: list[Batch]) -> Batch:
    v = np.concatenate([p[0] for p in parts])
    w = np.concatenate([np.ones_like(p[0]) if p[1] is None else p[1] for p in parts])
    return v, w


@settings(max_examples=150, deadline=None)
@given(spec_and_batches(4))
def test_any_split_into_batches_equals_one_batch(case: tuple[AggregationSpec, list[Batch]]) -> None:
    spec, parts = case
    whole = build(spec, concat(parts)).collect()
    assert_same(build(spec, *parts).collect(), whole, parts)
    assert_same(merged(*(build(spec, p) for p in parts)).collect(), whole, parts)


@settings(max_examples=15, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    cuts=st.lists(st.integers(0, 9000), min_size=1, max_size=4),
    order=st.permutations(range(5)),
)
def test_sketch_merges_like_one_batch(seed: int, cuts: list[int], order: list[int]) -> None:
    """Past the exact limit the sketch must still be batching- and order-invariant."""
    rng = np.random.default_rng(seed)
    v = np.round(rng.lognormal(4.0, 2.5, 9000) * rng.choice([-1.0, 1.0], 9000), 3)
    w = rng.integers(0, 50, 9000).astype(np.float64)
    spec = Quantiles((0.0, 0.05, 0.5, 0.95, 1.0))
    whole = build(spec, (v, w))
    assert isinstance(whole, QuantilesAccumulator)
    assert not whole.exact
    bounds = [0, *sorted(cuts), 9000, 9000, 9000][:6]
    parts = [(v[lo:hi], w[lo:hi]) for lo, hi in itertools.pairwise(bounds)]
    assert build(spec, *parts).collect() == whole.collect()
    accs = [build(spec, parts[i]) for i in order if i < len(parts)]
    assert merged(*accs).collect() == whole.collect()


@settings(max_examples=200, deadline=None)
@given(
    e0=st.integers(-1000, 1000),
    width=st.integers(1, 10_000),
    n=st.integers(1, 80),
    offsets=st.lists(st.floats(-5, 90, allow_nan=False), max_size=60),
)
def test_equal_width_histogram_bins_like_a_binary_search(
    e0: int, width: int, n: int, offsets: list[float]
) -> None:
    """The arithmetic fast path for equal-width integer bins agrees with the general search,
    including values exactly on an edge and outside the range."""
    from streamscope.aggregate.specs import Histogram

    edges = tuple(float(e0 + i * width) for i in range(n + 1))
    on_edges = [e0 + k * width for k in range(-1, n + 2)]
    values = np.array([e0 + o * width for o in offsets] + on_edges, dtype=np.float64)
    fast = Histogram(edges).create()
    fast.add_batch(values)
    slow_edges = np.asarray(edges)
    slot = np.searchsorted(slow_edges, values, side="right")
    counts = np.bincount(slot, minlength=n + 2)
    p = fast.collect()
    assert list(p.weights) == counts[1:-1].tolist()  # type: ignore[union-attr]
    assert (p.under, p.over) == (counts[0], counts[-1])  # type: ignore[union-attr]
