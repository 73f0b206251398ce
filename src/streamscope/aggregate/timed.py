"""Accumulators that need each value's time: the first and the last value of a frame.

In: values with their times (ns). Out: the value at the earliest (``first``) or latest
(``last``) time; merging keeps the earlier or later one, so it is associative and commutative.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.extreme import RunningExtreme

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


class Extreme(RunningExtreme):
    """The value at the extreme time; ties keep the larger value, so results never depend on order."""

    __slots__ = ()

    def add_batch(self, values: F64, weights: F64 | None = None) -> None:
        raise TypeError(f"'{self.stat}' needs the values' times: use add_timed")

    def add_timed(self, values: F64, times: I64) -> None:
        ok = ~np.isnan(values)
        if not ok.any():
            return
        v, t = values[ok], times[ok]
        i = int(np.argmax(t)) if self.largest else int(np.argmin(t))
        at = t == t[i]
        self.offer(int(t[i]), float(v[at].max()))


class FirstAccumulator(Extreme):
    __slots__ = ()
    stat = "first"
    largest = False


class LastAccumulator(Extreme):
    __slots__ = ()
    stat = "last"
    largest = True
