"""Accumulators that need each value's time: the first and the last value of a frame.

In: values with their times (ns). Out: the value at the earliest (``first``) or latest
(``last``) time; merging keeps the earlier or later one, so it is associative and commutative.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import Point, ScalarPoint

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class Extreme:
    """The value at the extreme time; ties keep the larger value, so results never depend on order."""

    __slots__ = ("_t", "_v")
    stat = ""
    latest = False

    def __init__(self) -> None:
        self._t: int | None = None
        self._v: float | None = None

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        raise TypeError(f"'{self.stat}' needs the values' times: use add_timed")

    def add_timed(self, values: F64, times: I64) -> None:
        ok = ~np.isnan(values)
        if not ok.any():
            return
        v, t = values[ok], times[ok]
        i = int(np.argmax(t)) if self.latest else int(np.argmin(t))
        at = t == t[i]
        self._take(int(t[i]), float(v[at].max()))

    def _take(self, t: int, v: float) -> None:
        if self._t is None or (t > self._t if self.latest else t < self._t):
            self._t, self._v = t, v
        elif t == self._t and self._v is not None:
            self._v = max(self._v, v)

    def collect(self) -> Point:
        return ScalarPoint(self.stat, self._v)

    def merge(self, other: object) -> None:
        if type(other) is not type(self):
            raise ValueError(f"cannot merge {type(other).__name__} into {type(self).__name__}")
        assert isinstance(other, Extreme)
        if other._t is not None and other._v is not None:
            self._take(other._t, other._v)


class FirstAccumulator(Extreme):
    __slots__ = ()
    stat = "first"
    latest = False


class LastAccumulator(Extreme):
    __slots__ = ()
    stat = "last"
    latest = True
