"""Each accumulator against a plain numpy computation on seeded random data."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from streamscope.aggregate import (
    Accumulator,
    Count,
    Duty,
    DutyPoint,
    Histogram,
    HistogramPoint,
    Max,
    Mean,
    Min,
    Quantiles,
    QuantilesPoint,
    ScalarPoint,
    Sum,
)
from streamscope.aggregate.accumulators import (
    EXACT_DISTINCT_LIMIT,
    SKETCH_RELATIVE_ACCURACY,
    QuantilesAccumulator,
)

F64 = NDArray[np.float64]
QS = (0.0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0)


def feed(acc: Accumulator, v: F64, w: F64 | None, n_batches: int = 7) -> Accumulator:
    for part in np.array_split(np.arange(v.size), n_batches):
        acc.add_batch(v[part], None if w is None else w[part])
    return acc


def scalar(acc: Accumulator) -> float | None:
    p = acc.collect()
    assert isinstance(p, ScalarPoint)
    return p.value


def quantiles(acc: Accumulator) -> tuple[float | None, ...]:
    p = acc.collect()
    assert isinstance(p, QuantilesPoint)
    return p.values


@pytest.fixture
def data() -> tuple[F64, F64]:
    rng = np.random.default_rng(12345)
    v = rng.normal(10.0, 5.0, 4000)
    w = rng.exponential(1000.0, 4000)
    w[rng.random(4000) < 0.1] = 0.0
    return v, w


@pytest.mark.parametrize("weighted", [False, True])
def test_scalars_match_numpy(data: tuple[F64, F64], weighted: bool) -> None:
    v, w_all = data
    w = w_all if weighted else None
    ones = np.ones_like(v) if w is None else w
    pos = v[ones > 0]
    assert scalar(feed(Count().create(), v, w)) == pytest.approx(ones.sum(), rel=1e-12)
    assert scalar(feed(Sum().create(), v, w)) == pytest.approx((v * ones).sum(), rel=1e-9)
    assert scalar(feed(Mean().create(), v, w)) == pytest.approx(
        np.average(v, weights=ones), rel=1e-9
    )
    assert scalar(feed(Min().create(), v, w)) == pos.min()
    assert scalar(feed(Max().create(), v, w)) == pos.max()


def test_min_max_ignore_zero_weight() -> None:
    v = np.array([-100.0, 1.0, 2.0, 100.0])
    w = np.array([0.0, 1.0, 3.0, 0.0])
    lo, hi = Min().create(), Max().create()
    lo.add_batch(v, w)
    hi.add_batch(v, w)
    assert (scalar(lo), scalar(hi)) == (1.0, 2.0)


def test_nan_values_are_ignored() -> None:
    v = np.array([1.0, np.nan, 3.0, np.nan])
    w = np.array([2.0, 5.0, 2.0, 7.0])
    for spec, expected in [(Count(), 4.0), (Sum(), 8.0), (Mean(), 2.0), (Min(), 1.0), (Max(), 3.0)]:
        acc = spec.create()
        acc.add_batch(v, w)
        assert scalar(acc) == expected, spec
    q = Quantiles((0.0, 0.5, 1.0)).create()
    q.add_batch(v, w)
    assert quantiles(q) == (1.0, 1.0, 3.0)
    h = Histogram((0.0, 2.0, 4.0)).create()
    h.add_batch(v, w)
    assert h.collect() == HistogramPoint((0.0, 2.0, 4.0), (2.0, 2.0), 0.0, 0.0)


def test_empty_accumulators() -> None:
    for spec, expected in [
        (Count(), 0.0),
        (Sum(), 0.0),
        (Mean(), None),
        (Min(), None),
        (Max(), None),
    ]:
        acc = spec.create()
        acc.add_batch(np.empty(0))
        assert scalar(acc) == expected, spec
    assert quantiles(Quantiles((0.1, 0.9)).create()) == (None, None)
    assert Histogram((0.0, 1.0, 2.0)).create().collect() == HistogramPoint(
        (0.0, 1.0, 2.0), (0.0, 0.0), 0.0, 0.0
    )
    assert Duty(("a", "b")).create().collect() == DutyPoint(("a", "b"), (0.0, 0.0))


def test_all_zero_weights_count_as_no_data() -> None:
    acc = Mean().create()
    acc.add_batch(np.array([1.0, 2.0]), np.zeros(2))
    assert scalar(acc) is None
    q = Quantiles((0.5,)).create()
    q.add_batch(np.array([1.0, 2.0]), np.zeros(2))
    assert quantiles(q) == (None,)


@pytest.mark.parametrize("weighted", [False, True])
def test_histogram_matches_numpy(data: tuple[F64, F64], weighted: bool) -> None:
    v, w_all = data
    w = w_all if weighted else None
    ones = np.ones_like(v) if w is None else w
    edges = (0.0, 2.5, 5.0, 10.0, 12.0, 20.0)
    point = feed(Histogram(edges).create(), v, w).collect()
    assert isinstance(point, HistogramPoint)
    inside = (v >= edges[0]) & (v < edges[-1])
    expected, _ = np.histogram(v[inside], bins=edges, weights=ones[inside])
    np.testing.assert_allclose(point.weights, expected, rtol=1e-12)
    assert point.under == pytest.approx(ones[v < edges[0]].sum(), rel=1e-12)
    assert point.over == pytest.approx(ones[v >= edges[-1]].sum(), rel=1e-12)
    assert point.total == pytest.approx(ones.sum(), rel=1e-12)


def test_histogram_bin_edges_are_half_open() -> None:
    acc = Histogram.levels(0, 2).create()  # edges 0, 1, 2, 3
    acc.add_batch(np.array([-1.0, -0.0, 0.0, 0.999, 1.0, 2.0, 2.999, 3.0, np.inf, -np.inf]))
    assert acc.collect() == HistogramPoint((0.0, 1.0, 2.0, 3.0), (3.0, 1.0, 2.0), 2.0, 2.0)


@pytest.mark.parametrize("weighted", [False, True])
def test_exact_quantiles_match_numpy(data: tuple[F64, F64], weighted: bool) -> None:
    v, w_all = data
    w = w_all if weighted else None
    acc = feed(Quantiles(QS).create(), v, w)
    assert isinstance(acc, QuantilesAccumulator)
    assert acc.exact
    expected = np.quantile(v, QS, method="inverted_cdf", weights=w)
    assert quantiles(acc) == tuple(expected.tolist())


def test_integer_data_gives_integer_quantiles() -> None:
    rng = np.random.default_rng(7)
    levels = rng.integers(0, 50, 3000).astype(np.float64)
    dur_ns = rng.integers(1, 10_000, 3000).astype(np.float64)
    for w in (None, dur_ns):
        values = quantiles(feed(Quantiles(QS).create(), levels, w))
        assert all(x is not None and float(x).is_integer() for x in values)
        assert values == tuple(np.quantile(levels, QS, method="inverted_cdf", weights=w).tolist())


def test_switch_to_sketch_stays_within_relative_accuracy() -> None:
    rng = np.random.default_rng(99)
    n = 30_000
    v = rng.lognormal(5.0, 3.0, n) * rng.choice([-1.0, 1.0], n)
    v[rng.random(n) < 0.05] = 0.0
    w = rng.integers(1, 1000, n).astype(np.float64)
    acc = Quantiles(QS).create()
    assert isinstance(acc, QuantilesAccumulator)
    acc.add_batch(v[:1000], w[:1000])
    assert acc.exact
    feed(acc, v[1000:], w[1000:], n_batches=20)
    assert not acc.exact
    got = np.array(quantiles(acc), dtype=np.float64)
    expected = np.quantile(v, QS, method="inverted_cdf", weights=w)
    err = np.abs(got - expected)
    assert np.all(err <= SKETCH_RELATIVE_ACCURACY * np.abs(expected) * (1 + 1e-9))
    assert (got[0], got[-1]) == (v.min(), v.max())


def test_memory_is_bounded() -> None:
    rng = np.random.default_rng(3)
    acc = Quantiles().create()
    assert isinstance(acc, QuantilesAccumulator)
    sizes = []
    for _ in range(30):
        acc.add_batch(rng.normal(0.0, 1e6, 1000))
        sizes.append(acc.nbytes)
    assert max(sizes) <= 2 * 8 * (EXACT_DISTINCT_LIMIT + 1000)
    assert sizes[-1] == sizes[10]


@pytest.mark.parametrize("sketch_side", ["self", "other"])
def test_merging_exact_with_sketch(sketch_side: str) -> None:
    rng = np.random.default_rng(5)
    big = rng.gamma(2.0, 100.0, 10_000)
    small = rng.integers(0, 10, 500).astype(np.float64)
    sketch, exact = Quantiles(QS).create(), Quantiles(QS).create()
    sketch.add_batch(big)
    exact.add_batch(small)
    assert isinstance(sketch, QuantilesAccumulator)
    assert isinstance(exact, QuantilesAccumulator)
    assert (sketch.exact, exact.exact) == (False, True)
    before = quantiles(exact if sketch_side == "self" else sketch)
    into, other = (sketch, exact) if sketch_side == "self" else (exact, sketch)
    into.merge(other)
    assert quantiles(other) == before  # the merged-in accumulator is untouched
    assert not into.exact
    both = np.concatenate([big, small])
    expected = np.quantile(both, QS, method="inverted_cdf")
    got = np.array(quantiles(into), dtype=np.float64)
    assert np.all(np.abs(got - expected) <= SKETCH_RELATIVE_ACCURACY * np.abs(expected) * 1.000001)


def test_duty_matches_bincount(data: tuple[F64, F64]) -> None:
    _, w = data
    rng = np.random.default_rng(11)
    codes = rng.integers(0, 4, w.size).astype(np.float64)
    point = feed(Duty().create(), codes, w).collect()
    assert isinstance(point, DutyPoint)
    expected = np.bincount(codes.astype(int), weights=w, minlength=4) / w.sum()
    np.testing.assert_allclose(point.fractions, expected, rtol=1e-12)
    assert point.labels == Duty().labels
    assert sum(point.fractions) == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [4.0, -1.0, 0.5])
def test_duty_rejects_unknown_codes(bad: float) -> None:
    with pytest.raises(ValueError, match="duty codes"):
        Duty().create().add_batch(np.array([0.0, bad]))


def test_bad_weights_are_rejected() -> None:
    acc = Sum().create()
    with pytest.raises(ValueError, match="entries"):
        acc.add_batch(np.ones(3), np.ones(2))
    with pytest.raises(ValueError, match="non-negative"):
        acc.add_batch(np.ones(2), np.array([1.0, -1.0]))
    with pytest.raises(ValueError, match="finite"):
        acc.add_batch(np.ones(2), np.array([1.0, np.nan]))


def test_merge_rejects_other_kinds_and_parameters() -> None:
    with pytest.raises(ValueError, match="cannot merge"):
        Count().create().merge(Sum().create())
    with pytest.raises(ValueError, match="edges"):
        Histogram((0.0, 1.0)).create().merge(Histogram((0.0, 2.0)).create())
    with pytest.raises(ValueError, match="quantiles"):
        Quantiles((0.5,)).create().merge(Quantiles((0.9,)).create())
    with pytest.raises(ValueError, match="labels"):
        Duty(("a", "b")).create().merge(Duty(("a", "c")).create())


def test_collect_leaves_state_alone(data: tuple[F64, F64]) -> None:
    v, w = data
    specs = [Count(), Sum(), Mean(), Min(), Max(), Histogram((0.0, 5.0, 10.0)), Quantiles(QS)]
    for spec in specs:
        once = spec.create()
        once.add_batch(v, w)
        twice = spec.create()
        twice.add_batch(v[:2000], w[:2000])
        first = twice.collect()
        assert twice.collect() == first
        twice.add_batch(v[2000:], w[2000:])
        assert _points_close(twice, once), spec


def _points_close(a: Accumulator, b: Accumulator) -> bool:
    pa, pb = a.collect(), b.collect()
    if isinstance(pa, ScalarPoint) and isinstance(pb, ScalarPoint):
        return pa.value == pytest.approx(pb.value, rel=1e-9)
    if isinstance(pa, HistogramPoint) and isinstance(pb, HistogramPoint):
        a_all = (*pa.weights, pa.under, pa.over)
        b_all = (*pb.weights, pb.under, pb.over)
        return pa.edges == pb.edges and bool(np.allclose(a_all, b_all, rtol=1e-12))
    return pa == pb


def test_every_spec_creates_a_matching_accumulator() -> None:
    specs = [Count(), Sum(), Mean(), Min(), Max(), Histogram((0.0, 1.0)), Quantiles(), Duty()]
    for spec in specs:
        acc = spec.create()
        assert isinstance(acc, Accumulator)
        assert acc.collect().stat == spec.stat


def test_first_and_last_follow_time_not_arrival_order() -> None:
    from streamscope.aggregate.specs import First, Last

    first, last = First().create(), Last().create()
    for acc in (first, last):
        acc.add_timed(np.array([5.0, 7.0]), np.array([20, 30]))  # type: ignore[attr-defined]
        acc.add_timed(np.array([1.0, 9.0]), np.array([10, 40]))  # type: ignore[attr-defined]
    assert first.collect().value == 1.0  # type: ignore[union-attr]
    assert last.collect().value == 9.0  # type: ignore[union-attr]
    a, b = First().create(), First().create()
    a.add_timed(np.array([3.0]), np.array([50]))  # type: ignore[attr-defined]
    b.add_timed(np.array([4.0]), np.array([5]))  # type: ignore[attr-defined]
    a.merge(b)
    assert a.collect().value == 4.0  # type: ignore[union-attr]
    with pytest.raises(TypeError, match="times"):
        First().create().add_batch(np.array([1.0]))
