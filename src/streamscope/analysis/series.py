"""A recorded run's frames as arrays, one ``Series`` per query and target, and their whole-run figures.

In: a ``Run``. Out: ``collect(run)`` (every ``Series``, ``NaN`` where a frame had no data), and
``whole_run``/``whole_run_duty``, which reduce a series' frames to one figure for the whole run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.points import (
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.store.reader import Run
from streamscope.store.retention import SUMMED_STATS
from streamscope.store.schema import quantile_stat
from streamscope.store.writer import QueryRecord

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

#: Whole-run reduction of a scalar stat over frames; any other stat: time-weighted mean (as
#: a run's rolled-up frames are merged, so that its whole-run figures stay what they were).
_SUMMED = SUMMED_STATS


@dataclass(frozen=True, slots=True)
class Series:
    """Every frame of one query for one target, as arrays (``NaN`` where a frame had no data).

    ``frames``: the frame numbers, ascending; ``covered``: the time each observed (ns).
    ``scalars`` holds scalar and quantile stats by name; ``duty`` is ``(frames, labels)`` fractions;
    ``hists`` the frames' histograms (``None`` where a frame had none); ``spans``: each frame's
    start and end (virtual ns from the run's start; empty where not known).
    """

    query: QueryRecord
    target: str
    frames: I64
    covered: F64
    scalars: dict[str, F64]
    duty_labels: tuple[str, ...] = ()
    duty: F64 | None = None
    hists: tuple[HistogramPoint | None, ...] = ()
    spans: I64 = field(default_factory=lambda: np.zeros((0, 2), np.int64))


def collect(run: Run) -> list[Series]:
    """All results of ``run`` grouped per (query, target), in query then target order."""
    by_key: dict[tuple[int, str], list[FrameResult]] = {}
    for r in run.results():
        by_key.setdefault((r.query_id, r.target), []).append(r)
    queries = {q.id: q for q in run.queries}
    return [
        _series(queries[qid], target, results)
        for (qid, target), results in by_key.items()
        if qid in queries
    ]


def _series(query: QueryRecord, target: str, results: Sequence[FrameResult]) -> Series:
    """One ``Series`` from the frames of one query and target (one loop per frame's points)."""
    n = len(results)
    scalars: dict[str, F64] = {}
    labels: tuple[str, ...] = ()
    duty_rows: list[tuple[float, ...]] = []
    hists: list[HistogramPoint | None] = []
    for i, r in enumerate(results):
        labels = labels or next(
            (p.labels for p in r.points if isinstance(p, DutyPoint) and p.labels), ()
        )
        hist, duty_row = _read_points(r.points, i, n, scalars, labels)
        hists.append(hist)
        if labels:
            duty_rows.append(duty_row or (math.nan,) * len(labels))
    return Series(
        query,
        target,
        np.fromiter((r.frame for r in results), np.int64, n),
        np.fromiter((r.covered_ns for r in results), np.float64, n),
        scalars,
        labels,
        _duty_matrix(duty_rows, n, len(labels)) if labels else None,
        tuple(hists),
        np.array([(r.t_start_ns, r.t_end_ns) for r in results], np.int64).reshape(n, 2),
    )


def _read_points(
    points: Sequence[Point], i: int, n: int, scalars: dict[str, F64], labels: tuple[str, ...]
) -> tuple[HistogramPoint | None, tuple[float, ...] | None]:
    """Frame ``i``'s scalars into ``scalars``; its first histogram and its duty row (for
    ``labels``, the series' duty labels), each ``None`` when the frame has none."""
    hist: HistogramPoint | None = None
    duty_row: tuple[float, ...] | None = None
    for p in points:
        if isinstance(p, ScalarPoint):
            _put(scalars, p.stat, i, n, p.value)
        elif isinstance(p, QuantilesPoint):
            for qv, v in zip(p.qs, p.values, strict=True):
                _put(scalars, quantile_stat(qv), i, n, v)
        elif isinstance(p, DutyPoint):
            if p.labels == labels:
                duty_row = p.fractions
        elif isinstance(p, HistogramPoint) and hist is None:
            hist = p
    return hist, duty_row


def _duty_matrix(rows: list[tuple[float, ...]], n: int, width: int) -> F64:
    # Frames before the first duty point have no row yet: pad them at the front.
    pad = [(math.nan,) * width] * (n - len(rows))
    return np.array(pad + rows, dtype=np.float64).reshape(n, width)


def _put(table: dict[str, F64], stat: str, i: int, n: int, value: float | None) -> None:
    arr = table.get(stat)
    if arr is None:
        arr = table[stat] = np.full(n, np.nan)
    arr[i] = math.nan if value is None else value


def whole_run(values: F64, covered: F64, stat: str) -> float | None:
    """One stat over the whole run from its per-frame ``values`` (``NaN``: no data).

    ``max``/``min``: the extreme frame; ``count``, ``sum``, ``violations``: the total; ``first``:
    the earliest frame's, ``last``: the latest's; anything else (``mean``, quantiles, ...): the mean
    over frames weighted by ``covered`` (a quantile's is the weighted mean of the frames'
    quantiles, not the run's quantile). ``None`` when no frame has data.
    """
    ok = ~np.isnan(values)
    if not ok.any():
        return None
    v, w = values[ok], covered[ok]
    if stat == "max":
        return float(v.max())
    if stat == "min":
        return float(v.min())
    if stat in _SUMMED:
        return float(v.sum())
    if stat == "first":
        return float(v[0])
    if stat == "last":
        return float(v[-1])
    total = float(w.sum())
    if total <= 0:
        return float(v.mean())
    return float(np.dot(v, w) / total)


def duty_observed(duty: F64, covered: F64) -> NDArray[np.bool_]:
    """Frames with duty data: some of the frame observed (a frame where the stage's states
    were all unknown, a worker not started yet or gone, has fractions that sum to 0)."""
    ok: NDArray[np.bool_] = (
        ~np.isnan(duty).any(axis=1) & (covered > 0) & (np.nansum(duty, axis=1) > 0)
    )
    return ok


def whole_run_duty(s: Series) -> dict[str, float] | None:
    """The duty fractions of ``s`` over the whole run, weighted by ``covered_ns``; ``None``: none."""
    if s.duty is None:
        return None
    ok = duty_observed(s.duty, s.covered)
    if not ok.any():
        return None
    w = s.covered[ok]
    fr = (s.duty[ok] * w[:, None]).sum(axis=0) / w.sum()
    return {label: float(f) for label, f in zip(s.duty_labels, fr, strict=True)}
