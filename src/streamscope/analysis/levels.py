"""How much of each frame a channel spent empty or full, read from its occupancy histograms.

In: occupancy ``HistogramPoint``s (or a ``Series`` of them) and the channel's capacity. Out: the
weight at level 0 and at level ``capacity`` (``NaN`` where the bins cannot single the level out).
"""

from __future__ import annotations

import math

import numpy as np

from streamscope.aggregate.points import HistogramPoint
from streamscope.analysis.series import F64, Series


def level_fractions(hist: HistogramPoint, capacity: int | None) -> tuple[float, float | None]:
    """(weight at level 0, weight at level ``capacity``) of an occupancy histogram, as weights.

    Occupancy levels are integers, so a bin (or the under/over weight) counts for a level when the
    level is the only integer it can hold. ``NaN`` when the bins cannot tell; the second is
    ``None`` when ``capacity`` is ``None`` or 0 (a queue with no fixed capacity).
    """
    edges = np.asarray(hist.edges, dtype=np.float64)
    weights = np.nan_to_num(np.asarray(hist.weights, dtype=np.float64))
    under, over = (0.0 if not math.isfinite(x) else x for x in (hist.under, hist.over))
    empty = _bottom_weight(edges, weights, under)
    if capacity is None or capacity < 1:  # (0: no fixed capacity, never full)
        return empty, None
    return empty, _top_weight(edges, weights, over, capacity)


def _bottom_weight(edges: F64, weights: F64, under: float) -> float:
    """Weight at level 0, ``NaN`` if the bin that holds it holds another level too."""
    if edges.size < 2:
        return math.nan
    if edges[0] > 0:
        return under if edges[0] <= 1 else math.nan
    i = int(np.searchsorted(edges, 0, side="right")) - 1
    if i >= weights.size:
        return math.nan
    if edges[i + 1] > 1:
        return math.nan
    return float(weights[i])


def _top_weight(edges: F64, weights: F64, over: float, level: int) -> float:
    """Weight at ``level`` and above, ``NaN`` if ambiguous."""
    if edges.size < 2:
        return math.nan
    # Nothing lies above the capacity: every bin from the one holding `level` up counts,
    # provided that bin holds no level below it.
    if level >= edges[-1]:
        return over if edges[-1] > level - 1 else math.nan
    i = int(np.searchsorted(edges, level, side="right")) - 1
    if i < 0:
        return math.nan
    if edges[i] <= level - 1:
        return math.nan
    return float(weights[i:].sum() + over)


def full_empty_per_frame(s: Series, capacity: int | None) -> tuple[F64, F64, F64]:
    """Per frame of an occupancy series: (total weight, empty weight, full weight), NaN: unknown."""
    n = len(s.hists)
    total, empty, full = np.full(n, np.nan), np.full(n, np.nan), np.full(n, np.nan)
    for i, h in enumerate(s.hists):
        if h is None:
            continue
        tot = float(np.nansum(np.asarray(h.weights, dtype=np.float64))) + h.under + h.over
        if not math.isfinite(tot) or tot <= 0:
            continue
        e, f = level_fractions(h, capacity)
        total[i], empty[i] = tot, e
        if f is not None:
            full[i] = f
    return total, empty, full
