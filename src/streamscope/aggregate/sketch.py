"""A fixed-size, mergeable quantile sketch for values that outgrow an exact table.

In: values with positive weights. Out: weighted quantiles within a stated relative error
(DDSketch-style log buckets), with the exact minimum and maximum kept.
"""

from __future__ import annotations

import math
from typing import cast

import numpy as np
from numpy.typing import NDArray

F64 = NDArray[np.float64]
#: Relative accuracy of every quantile the sketch returns.
SKETCH_RELATIVE_ACCURACY = 0.01


def quantile_index(cum: F64, qs: F64) -> NDArray[np.intp]:
    """Index of the first entry whose normalised cumulative weight reaches each q
    (the inverted CDF, computed as numpy's weighted ``inverted_cdf`` does)."""
    cdf = cum / cum[-1]
    return np.minimum(np.searchsorted(cdf, qs, side="left"), cum.size - 1)


# The sketch's buckets: key k holds magnitudes in (γ^(k-1), γ^k]; every value in a bucket is
# within the relative accuracy of the bucket's representative 2γ^k / (γ + 1). Magnitudes below
# _MIN_MAG count as zero; above _MAX_MAG they share the top bucket. One array, in value order:
# negative keys (descending), zero, positive keys (ascending), so a cumsum over it is the CDF.
_GAMMA = (1.0 + SKETCH_RELATIVE_ACCURACY) / (1.0 - SKETCH_RELATIVE_ACCURACY)
_LOG_GAMMA = math.log(_GAMMA)
_MIN_MAG = 2.0**-40
_MAX_MAG = 2.0**60
_KEY_LO = math.ceil(math.log(_MIN_MAG) / _LOG_GAMMA)
_KEY_HI = math.ceil(math.log(_MAX_MAG) / _LOG_GAMMA)
_NKEYS = _KEY_HI - _KEY_LO + 1
_MAGS = 2.0 * _GAMMA ** np.arange(_KEY_LO, _KEY_HI + 1, dtype=np.float64) / (_GAMMA + 1.0)
_REPRESENTATIVE: F64 = np.concatenate([-_MAGS[::-1], [0.0], _MAGS])


class LogSketch:
    """Fixed-size log-bucket quantile sketch (DDSketch-style) with exact min and max."""

    __slots__ = ("_counts", "_max", "_min")

    def __init__(self) -> None:
        self._counts: F64 = np.zeros(2 * _NKEYS + 1, dtype=np.float64)
        self._min = math.inf
        self._max = -math.inf

    @property
    def nbytes(self) -> int:
        """Bytes held by its buckets (fixed)."""
        return int(self._counts.nbytes)

    def copy(self) -> LogSketch:
        s = LogSketch()
        s._counts[:] = self._counts
        s._min, s._max = self._min, self._max
        return s

    def add(self, v: F64, w: F64) -> None:
        """Add values with positive weights."""
        if not v.size:
            return
        mag = np.abs(v)
        with np.errstate(divide="ignore"):
            key = np.clip(np.ceil(np.log(mag) / _LOG_GAMMA), _KEY_LO, _KEY_HI).astype(np.int64)
        pos = key - _KEY_LO
        slot = np.where(mag < _MIN_MAG, _NKEYS, np.where(v > 0, _NKEYS + 1 + pos, _NKEYS - 1 - pos))
        self._counts += np.bincount(slot, weights=w, minlength=self._counts.size).astype(np.float64)
        self._min = min(self._min, float(v.min()))
        self._max = max(self._max, float(v.max()))

    def merge(self, other: LogSketch) -> None:
        self._counts += other._counts
        self._min = min(self._min, other._min)
        self._max = max(self._max, other._max)

    def quantiles(self, qs: F64) -> list[float | None]:
        nz = np.flatnonzero(self._counts)
        if not nz.size:
            return [None] * qs.size
        est = _REPRESENTATIVE[nz[quantile_index(np.cumsum(self._counts[nz]), qs)]]
        est = np.clip(est, self._min, self._max)
        est = np.where(qs == 0.0, self._min, np.where(qs == 1.0, self._max, est))
        return cast(list[float | None], est.tolist())
