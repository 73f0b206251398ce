"""Stateful accumulators behind the aggregation specs: whole numpy batches (values, optional
weights) flow in through ``add_batch``; frozen points flow out of ``collect``; ``merge`` combines
two accumulators of one spec. State is bounded however many batches arrive.
"""

from __future__ import annotations

import math
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.aggregate._merge import check_params, same_kind
from streamscope.aggregate.extreme import RunningExtreme
from streamscope.aggregate.points import (
    DutyPoint,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.aggregate.sketch import SKETCH_RELATIVE_ACCURACY, LogSketch, quantile_index
from streamscope.core.numeric import dot

__all__ = [
    "EXACT_DISTINCT_LIMIT",
    "SKETCH_RELATIVE_ACCURACY",
    "Accumulator",
    "CountAccumulator",
    "DutyAccumulator",
    "ExtremeAccumulator",
    "HistogramAccumulator",
    "MaxAccumulator",
    "MeanAccumulator",
    "MinAccumulator",
    "QuantilesAccumulator",
    "SumAccumulator",
]

F64 = NDArray[np.float64]
_add = np.add.reduce
_least = np.minimum.reduce

EXACT_DISTINCT_LIMIT = 4096
"""Quantiles stay exact while at most this many distinct values have been seen."""

#: ``SKETCH_RELATIVE_ACCURACY`` (from ``sketch``): the relative error bound of the log-bucket
#: sketch used past ``EXACT_DISTINCT_LIMIT``.


@runtime_checkable
class Accumulator(Protocol):
    """Private running state of one aggregation spec over one frame."""

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        """Add a whole batch; ``weights`` None means weight 1 each. NaN values are ignored."""

    def collect(self) -> Point:
        """The current result as a frozen point; the state is left as it was."""
        ...

    def merge(self, other: Accumulator) -> None:
        """Fold ``other`` (same class and parameters, else ValueError) into this one."""


def _prepare(values: ArrayLike, weights: ArrayLike | None) -> tuple[F64, F64 | None]:
    """Flatten to float64, drop NaN values, and check weights are finite and non-negative.

    Called per target and frame with a few values each where a program has many channels:
    one reduction tells that no value is NaN (their sum is not), two that the weights are
    fine (their least is not negative, NaN being neither, and their sum is finite)."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    w = None if weights is None else np.asarray(weights, dtype=np.float64).reshape(-1)
    if w is not None and w.shape != v.shape:
        raise ValueError(f"weights has {w.size} entries but values has {v.size}")
    if math.isnan(_add(v)):  # a NaN among them (or +inf and -inf: none is dropped then)
        keep = ~np.isnan(v)
        v = v[keep]
        w = None if w is None else w[keep]
    if w is not None and w.size and not (_least(w) >= 0.0 and math.isfinite(_add(w))):
        raise ValueError("weights must be finite and non-negative")
    return v, w


def _positive(values: ArrayLike, weights: ArrayLike | None) -> tuple[F64, F64]:
    """Like ``_prepare`` but with explicit weights and zero-weight values removed."""
    v, w = _prepare(values, weights)
    if w is None:
        return v, np.ones_like(v)
    keep = w > 0.0
    return v[keep], w[keep]


def _total(v: F64, w: F64 | None) -> float:
    return float(v.size) if w is None else float(w.sum())


def _weighted_sum(v: F64, w: F64 | None) -> float:
    return float(v.sum() if w is None else dot(v, w))


class CountAccumulator:
    """Number of values; with weights, the total weight."""

    __slots__ = ("_w",)

    def __init__(self) -> None:
        self._w = 0.0

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        self._w += _total(v, w)

    def collect(self) -> Point:
        return ScalarPoint("count", self._w)

    def merge(self, other: Accumulator) -> None:
        self._w += same_kind(self, other)._w


class SumAccumulator:
    """Sum of weight × value."""

    __slots__ = ("_s",)

    def __init__(self) -> None:
        self._s = 0.0

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        self._s += _weighted_sum(v, w)

    def collect(self) -> Point:
        return ScalarPoint("sum", self._s)

    def merge(self, other: Accumulator) -> None:
        self._s += same_kind(self, other)._s


class MeanAccumulator:
    """Weighted mean Σ w·v / Σ w; None while the total weight is zero."""

    __slots__ = ("_s", "_w")

    def __init__(self) -> None:
        self._s = 0.0
        self._w = 0.0

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        self._s += _weighted_sum(v, w)
        self._w += _total(v, w)

    def collect(self) -> Point:
        return ScalarPoint("mean", self._s / self._w if self._w > 0.0 else None)

    def merge(self, other: Accumulator) -> None:
        o = same_kind(self, other)
        self._s += o._s
        self._w += o._w


class ExtremeAccumulator(RunningExtreme):
    """Smallest (``largest = False``) or largest value with a positive weight; None without one.
    :class:`MinAccumulator` and :class:`MaxAccumulator` fix the direction."""

    __slots__ = ()

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        if w is not None:
            v = v[w > 0.0]
        if v.size:
            m = float(v.max() if self.largest else v.min())
            self.offer(m, m)


class MinAccumulator(ExtremeAccumulator):
    """Smallest value with a positive weight; None without one."""

    __slots__ = ()
    stat = "min"
    largest = False


class MaxAccumulator(ExtremeAccumulator):
    """Largest value with a positive weight; None without one."""

    __slots__ = ()
    stat = "max"
    largest = True


_Edges = tuple[tuple[float, ...], "F64", "tuple[float, float] | None"]
#: Each set of histogram edges checked once per process: a monitor makes an accumulator per
#: target and frame (thousands a second for a program with many channels), from few sets.
_EDGES: dict[tuple[float, ...], _Edges] = {}


def _edges(edges: tuple[float, ...]) -> _Edges:
    """The edges as floats and as an array, checked, and ``(e0, width)`` where they are
    equal-width bins on integers (occupancy levels, nanosecond ranges), whose bin is found by
    arithmetic instead of a binary search per value ((v - e0) / width is exact at every edge
    there; other edges keep the search, which is exact everywhere)."""
    as_floats = tuple(float(e) for e in edges)
    arr = np.asarray(as_floats, dtype=np.float64)
    arr.flags.writeable = False
    if arr.size < 2 or not bool(np.all(np.diff(arr) > 0)):
        raise ValueError("histogram edges must be at least two strictly increasing numbers")
    e0, width = float(arr[0]), float(arr[1] - arr[0])
    exact = (
        e0.is_integer()
        and width.is_integer()
        and abs(float(arr[-1])) < 2.0**52
        and np.array_equal(e0 + width * np.arange(arr.size), arr)
    )
    return as_floats, arr, (e0, width) if exact else None


class HistogramAccumulator:
    """Weight per bin ``[edges[i], edges[i+1])``; below the first edge goes to ``under``, at or
    above the last edge to ``over``. Fixed size: ``len(edges) + 1`` floats."""

    __slots__ = ("_edges", "_edges_arr", "_uniform", "_w")

    def __init__(self, edges: tuple[float, ...]) -> None:
        shape = _EDGES.get(edges)
        if shape is None:
            shape = _EDGES[edges] = _edges(edges)
        self._edges, self._edges_arr, self._uniform = shape
        # slot 0 is under, slots 1..n the bins, slot n+1 over
        self._w: F64 = np.zeros(self._edges_arr.size + 1, dtype=np.float64)

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        if self._uniform is not None:
            e0, width = self._uniform
            # floor((v - e0) / width) + 1, clipped into [under, over]; NaN were removed already.
            slot = np.clip(np.floor((v - e0) / width) + 1, 0, self._w.size - 1).astype(np.int64)
        else:
            slot = np.searchsorted(self._edges_arr, v, side="right")
        self._w += np.bincount(slot, weights=w, minlength=self._w.size).astype(np.float64)

    def collect(self) -> Point:
        w = self._w.tolist()
        return HistogramPoint(self._edges, tuple(w[1:-1]), w[0], w[-1])

    def merge(self, other: Accumulator) -> None:
        o = same_kind(self, other)
        check_params("edges", self._edges, o._edges)
        self._w += o._w


class DutyAccumulator:
    """Fraction of the total weight per integer code ``0..len(labels)-1``."""

    __slots__ = ("_labels", "_w")

    def __init__(self, labels: tuple[str, ...]) -> None:
        if not labels:
            raise ValueError("duty needs at least one label")
        self._labels = tuple(labels)
        self._w: F64 = np.zeros(len(labels), dtype=np.float64)

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        v, w = _prepare(values, weights)
        codes = v.astype(np.int64)
        if codes.size and (
            not bool(np.all(codes == v)) or int(codes.min()) < 0 or int(codes.max()) >= self._w.size
        ):
            raise ValueError(f"duty codes must be integers 0..{self._w.size - 1}")
        self._w += np.bincount(codes, weights=w, minlength=self._w.size).astype(np.float64)

    def collect(self) -> Point:
        total = float(self._w.sum())
        fractions = (self._w / total).tolist() if total > 0.0 else [0.0] * self._w.size
        return DutyPoint(self._labels, tuple(fractions))

    def merge(self, other: Accumulator) -> None:
        o = same_kind(self, other)
        check_params("labels", self._labels, o._labels)
        self._w += o._w


class QuantilesAccumulator:
    """Weighted quantiles: for each q, the smallest value v whose cumulative weight reaches q·W
    (the inverted CDF, so integer-valued data yields integers).

    Exact while at most ``EXACT_DISTINCT_LIMIT`` distinct values have been seen (a compacted
    table of unique values and summed weights). Past that it switches, once and for good, to a
    fixed-size log-bucket sketch (DDSketch-style) whose answers are within
    ``SKETCH_RELATIVE_ACCURACY`` (1 %) relative error; q = 0 and q = 1 stay exact (min, max).
    The sketch handles zero and negative values; magnitudes below 2**-40 count as zero and
    magnitudes above 2**60 lose the relative guarantee. Exact and sketch states merge freely.
    """

    __slots__ = ("_qs", "_qs_arr", "_sketch", "_vals", "_wts")

    def __init__(self, qs: tuple[float, ...]) -> None:
        self._qs = tuple(float(q) for q in qs)
        self._qs_arr = np.asarray(self._qs, dtype=np.float64)
        if not self._qs or not bool(np.all((self._qs_arr >= 0.0) & (self._qs_arr <= 1.0))):
            raise ValueError("quantiles must be between 0 and 1")
        self._vals: F64 = np.empty(0, dtype=np.float64)
        self._wts: F64 = np.empty(0, dtype=np.float64)
        self._sketch: LogSketch | None = None

    @property
    def exact(self) -> bool:
        """True while the answers are exact (the sketch has not been needed)."""
        return self._sketch is None

    @property
    def nbytes(self) -> int:
        """Bytes held by the state's arrays (bounded: the table is capped, the sketch fixed)."""
        sketch = 0 if self._sketch is None else self._sketch.nbytes
        return self._vals.nbytes + self._wts.nbytes + sketch

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        self._add(*_positive(values, weights))

    def _add(self, v: F64, w: F64) -> None:
        if self._sketch is not None:
            self._sketch.add(v, w)
            return
        if not v.size:
            return
        vals, inverse = np.unique(np.concatenate([self._vals, v]), return_inverse=True)
        wts = np.bincount(inverse, weights=np.concatenate([self._wts, w])).astype(np.float64)
        if vals.size > EXACT_DISTINCT_LIMIT:
            self._sketch = LogSketch()
            self._sketch.add(vals, wts)
            vals, wts = np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)
        self._vals, self._wts = vals, wts

    def collect(self) -> Point:
        if self._sketch is not None:
            values = self._sketch.quantiles(self._qs_arr)
        elif self._vals.size:
            idx = quantile_index(np.cumsum(self._wts), self._qs_arr)
            values = self._vals[idx].tolist()
        else:
            values = [None] * len(self._qs)
        return QuantilesPoint(self._qs, tuple(values))

    def merge(self, other: Accumulator) -> None:
        o = same_kind(self, other)
        check_params("quantiles", self._qs, o._qs)
        if o._sketch is not None:
            if self._sketch is None:
                self._sketch = o._sketch.copy()
                self._sketch.add(self._vals, self._wts)
                self._vals, self._wts = np.empty(0, dtype=np.float64), np.empty(0, dtype=np.float64)
            else:
                self._sketch.merge(o._sketch)
        self._add(o._vals, o._wts)
