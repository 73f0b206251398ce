"""Aggregation specs: frozen descriptions that create private stateful accumulators.

Every spec has a ``stat`` name (used in results) and ``create()``. The accumulators live in
``accumulators``; this module stays import-light so queries can name specs cheaply.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streamscope.aggregate.accumulators import Accumulator


@dataclass(frozen=True, slots=True)
class Count:
    """Number of values (with weights: the total weight)."""

    stat = "count"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import CountAccumulator

        return CountAccumulator()


@dataclass(frozen=True, slots=True)
class Sum:
    """Sum of values (with weights: the sum of weight × value)."""

    stat = "sum"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import SumAccumulator

        return SumAccumulator()


@dataclass(frozen=True, slots=True)
class Min:
    """Smallest value with a positive weight."""

    stat = "min"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import MinAccumulator

        return MinAccumulator()


@dataclass(frozen=True, slots=True)
class Max:
    """Largest value with a positive weight."""

    stat = "max"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import MaxAccumulator

        return MaxAccumulator()


@dataclass(frozen=True, slots=True)
class Mean:
    """Weighted mean: sum(w * v) / sum(w)."""

    stat = "mean"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import MeanAccumulator

        return MeanAccumulator()


@dataclass(frozen=True, slots=True)
class Histogram:
    """Weights per bin between strictly increasing ``edges``; outside goes to under/over."""

    edges: tuple[float, ...]
    stat = "histogram"

    def __post_init__(self) -> None:
        if len(self.edges) < 2 or any(
            b <= a for a, b in zip(self.edges, self.edges[1:], strict=False)
        ):
            raise ValueError("histogram edges must be at least two strictly increasing numbers")

    @classmethod
    def from_range(cls, lo: float, hi: float, width: float) -> Histogram:
        """Bins of ``width`` from ``lo`` up to and including the bin that contains ``hi``."""
        if width <= 0 or hi < lo:
            raise ValueError("histogram range needs lo <= hi and width > 0")
        n = int((hi - lo) // width) + 1
        return cls(tuple(lo + i * width for i in range(n + 1)))

    @classmethod
    def levels(cls, lo: int, hi: int) -> Histogram:
        """One bin per integer level ``lo..hi`` inclusive (edges lo, lo+1, ..., hi+1)."""
        return cls(tuple(float(v) for v in range(lo, hi + 2)))

    @classmethod
    def doubling(cls, top: int = 1 << 20) -> Histogram:
        """Levels of a queue with no fixed capacity: 0 and 1 a bin each, then bins twice as
        wide each (2-3, 4-7, ...) up to ``top`` (above it: the over weight)."""
        edges = [0.0, 1.0]
        while edges[-1] < top:
            edges.append(2 * edges[-1])
        return cls(tuple(edges))

    @classmethod
    def doubling_to(cls, capacity: int) -> Histogram:
        """Levels of a queue of ``capacity``: 0 and 1 a bin each, then bins twice as wide each
        (2-3, 4-7, ...) below ``capacity``, and ``capacity`` (full) a bin of its own."""
        edges = [0.0, 1.0]
        while 2 * edges[-1] < capacity:
            edges.append(2 * edges[-1])
        if edges[-1] < capacity:
            edges.append(float(capacity))
        edges.append(float(capacity + 1))
        return cls(tuple(edges))

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import HistogramAccumulator

        return HistogramAccumulator(self.edges)


@dataclass(frozen=True, slots=True)
class Quantiles:
    """Weighted quantiles ``qs`` (each in [0, 1]); exact up to a few thousand distinct values,
    then within a stated relative error (a log-bucket sketch)."""

    qs: tuple[float, ...] = (0.5, 0.9, 0.99)
    stat = "quantiles"

    def __post_init__(self) -> None:
        if not self.qs or any(not 0.0 <= q <= 1.0 for q in self.qs):
            raise ValueError("quantiles must be between 0 and 1")

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import QuantilesAccumulator

        return QuantilesAccumulator(self.qs)


@dataclass(frozen=True, slots=True)
class Duty:
    """Fraction of weight per integer code ``0..len(labels)-1`` (stage state duty cycles)."""

    labels: tuple[str, ...] = ("idle", "busy", "blocked_in", "blocked_out")
    stat = "duty"

    def create(self) -> Accumulator:
        from streamscope.aggregate.accumulators import DutyAccumulator

        return DutyAccumulator(self.labels)


@dataclass(frozen=True, slots=True)
class First:
    """The value with the earliest time in the frame (e.g. the first item's latency)."""

    stat = "first"

    def create(self) -> Accumulator:
        from streamscope.aggregate.timed import FirstAccumulator

        return FirstAccumulator()


@dataclass(frozen=True, slots=True)
class Last:
    """The value with the latest time in the frame (e.g. the last item's latency)."""

    stat = "last"

    def create(self) -> Accumulator:
        from streamscope.aggregate.timed import LastAccumulator

        return LastAccumulator()


AggregationSpec = Count | Sum | Min | Max | Mean | Histogram | Quantiles | Duty | First | Last
