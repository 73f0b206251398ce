"""The fixed bins of every sub-queue gap histogram: durations (ns) in, bin indices out; and the
bins' edges (ns), scaled where a clock-rate correction asks for it.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "GAP_EDGES_NS",
    "MANTISSA_BITS",
    "N_GAP_BINS",
    "OCTAVES",
    "GapKind",
    "gap_bins",
    "gap_edges_ns",
]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

#: Sub-bins per octave: the bits of a gap's mantissa below its leading one.
MANTISSA_BITS = 3
#: Octaves covered above 1 ns.
OCTAVES = 42

#: Fixed edges (ns) of every gap histogram: 0, then ``2**e * (1 + m/8)`` for each octave ``e`` of
#: ``0..41`` and ``m`` of ``0..7``, then ``2**42`` (1 ns .. ~4.4e12 ns, each bin at most 1/8 of its
#: lower edge wide). A log-linear scale: a duration's bin is its octave (the place of its leading
#: one) and the three bits after it, which a probe core finds with a priority encoder
#: (``hw.channel``), where geometric edges would need a logarithm.
GAP_EDGES_NS: F64 = np.concatenate(
    (
        [0.0],
        (
            2.0 ** np.arange(OCTAVES, dtype=np.float64)[:, None]
            * (1.0 + np.arange(1 << MANTISSA_BITS, dtype=np.float64) / (1 << MANTISSA_BITS))
        ).ravel(),
        [2.0**OCTAVES],
    )
)
GAP_EDGES_NS.setflags(write=False)
N_GAP_BINS = len(GAP_EDGES_NS) - 1

#: The three gap histograms of a summary: inter-insertion, back-to-back inter-departure and
#: production gaps.
GapKind = Literal["gap_in", "gap_out", "gap_prod"]


def gap_edges_ns(scale: float = 1.0) -> F64:
    """The fixed gap-histogram edges in ns, each multiplied by ``scale`` (a clock-rate correction)."""
    if not (math.isfinite(scale) and scale > 0.0):
        raise ValueError(f"scale must be a finite positive number, got {scale}")
    out: F64 = GAP_EDGES_NS * float(scale)
    return out


def gap_bins(d_ns: ArrayLike) -> I64:
    """Bin of each duration (ns) among :data:`GAP_EDGES_NS`; longer ones go in the last bin."""
    d = np.asarray(d_ns, dtype=np.float64)
    idx = np.searchsorted(GAP_EDGES_NS, d, side="right") - 1
    out: I64 = np.clip(idx, 0, N_GAP_BINS - 1).astype(np.int64)
    return out
