"""Input checks shared by the queue models: arrays of times in, float64 arrays out (or an error)."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.core.errors import StreamscopeError

F64 = NDArray[np.float64]


class ModelInputError(StreamscopeError):
    """Times or parameters handed to a queue model that it cannot simulate."""


def as_times(name: str, values: ArrayLike) -> F64:
    """``values`` as a 1-D float64 array of finite times/durations in ns, or a ModelInputError."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ModelInputError(f"{name}: expected a 1-D array of ns, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ModelInputError(f"{name}: every value must be finite (ns)")
    return arr


def as_durations(name: str, values: ArrayLike, n: int) -> F64:
    """Non-negative durations (ns), one per customer: a length-``n`` array or a scalar."""
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim == 0:
        # one value for all customers (if any): checked once, not n times
        if n:
            as_times(name, arr.reshape(1))
            if float(arr) < 0.0:
                raise ModelInputError(f"{name}: durations must be >= 0 ns, got {float(arr)}")
        return np.full(n, float(arr))
    arr = as_times(name, arr)
    if arr.shape[0] != n:
        raise ModelInputError(f"{name}: expected {n} values (one per customer), got {arr.shape[0]}")
    if n and float(arr.min()) < 0.0:
        raise ModelInputError(f"{name}: durations must be >= 0 ns, got {float(arr.min())}")
    return arr


def check_sorted(name: str, arr: F64) -> None:
    """FIFO models need arrivals in order."""
    if arr.shape[0] > 1 and bool((arr[1:] < arr[:-1]).any()):
        raise ModelInputError(f"{name}: arrival times must be non-decreasing (FIFO order)")


def check_capacity(name: str, capacity: int) -> int:
    if int(capacity) != capacity or capacity < 0:
        raise ModelInputError(f"{name}: capacity must be an integer >= 0, got {capacity!r}")
    return int(capacity)
