"""Numeric helpers every layer may use."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray


def dot(v: NDArray[np.float64] | NDArray[np.int64], w: NDArray[np.float64]) -> float:
    """sum(v * w) on this thread: ``np.dot`` hands long vectors to a BLAS thread pool, whose
    workers then spin on the other cores for a while (CPU the application needs: a monitor's
    frame of virtual-queue estimation cost ~9 ms more CPU with them than without)."""
    return float(np.einsum("i,i->", v, w))
