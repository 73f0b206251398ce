"""Frame results ⇄ table rows, shared by every store and reader so both directions agree.

In: ``FrameResult`` batches. Out: columns for ``frame``/``stat``/``histogram``; and back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from streamscope.aggregate.points import (
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.store.schema import OVER_BIN, UNDER_BIN, quantile_of, quantile_stat

Key = tuple[int, str, int]
FrameRow = tuple[int, str, int, int, int, int]
StatRow = tuple[int, str, int, str, str, float | None]
HistRow = tuple[int, str, int, str, int, float | None, float | None, float | None]

FRAME_COLUMNS = ("query_id", "target", "frame", "t_start_ns", "t_end_ns", "covered_ns")
STAT_COLUMNS = ("query_id", "target", "frame", "point", "stat", "value")
HIST_COLUMNS = ("query_id", "target", "frame", "point", "bin", "lo", "hi", "weight")
DROP_COLUMNS = ("probe_id", "frame", "dropped", "recorded")


@dataclass(frozen=True, slots=True)
class Rows:
    """Column lists for the ``frame``, ``stat`` and ``histogram`` tables (order of *_COLUMNS)."""

    frame: list[list[Any]]
    stat: list[list[Any]]
    hist: list[list[Any]]


def flatten(results: Iterable[FrameResult]) -> Rows:
    """Split results into table columns. ``None`` values become ``None`` (NULL)."""
    frame: list[list[Any]] = [[] for _ in FRAME_COLUMNS]
    stat: list[list[Any]] = [[] for _ in STAT_COLUMNS]
    hist: list[list[Any]] = [[] for _ in HIST_COLUMNS]
    fq, ft, ff, fs, fe, fc = frame
    sq, st, sf, sp, ss, sv = stat
    hq, ht, hf, hp, hb, hl, hh, hw = hist
    # One Python step per frame and point (not per event); bins are extended in bulk.
    for r in results:
        q, t, f = r.query_id, r.target, r.frame
        fq.append(q)
        ft.append(t)
        ff.append(f)
        fs.append(r.t_start_ns)
        fe.append(r.t_end_ns)
        fc.append(r.covered_ns)
        for p in r.points:
            if isinstance(p, HistogramPoint):
                n = len(p.weights) + 2
                edges = p.edges or (None,)
                hq.extend([q] * n)
                ht.extend([t] * n)
                hf.extend([f] * n)
                hp.extend([p.stat] * n)
                hb.extend([UNDER_BIN, OVER_BIN, *range(len(p.weights))])
                hl.extend([None, edges[-1], *p.edges[:-1]])
                hh.extend([edges[0], None, *p.edges[1:]])
                hw.extend([p.under, p.over, *p.weights])
                continue
            if isinstance(p, ScalarPoint):
                names: Sequence[str] = (p.stat,)
                values: Sequence[float | None] = (p.value,)
            elif isinstance(p, QuantilesPoint):
                names, values = [quantile_stat(x) for x in p.qs], p.values
            else:
                names, values = [f"{p.stat}.{label}" for label in p.labels], p.fractions
            n = len(names)
            sq.extend([q] * n)
            st.extend([t] * n)
            sf.extend([f] * n)
            sp.extend([p.stat] * n)
            ss.extend(names)
            sv.extend(values)
    return Rows(frame, stat, hist)


Columns = Mapping[str, Any]
"""Column name → numpy array (NULL floats masked), as DuckDB's ``fetchnumpy`` returns them."""

SORT_KEYS = {
    "frame": ("query_id", "target", "frame"),
    "stat": ("query_id", "target", "frame", "point"),
    "histogram": ("query_id", "target", "frame", "point", "bin"),
}
"""How each results table must be sorted for ``rebuild`` (ties: insertion order)."""

_FLOATS = {"value", "lo", "hi", "weight"}
_STRINGS = {"target", "point", "stat"}


def columns(rows: Sequence[tuple[Any, ...]], names: Sequence[str], table: str) -> dict[str, Any]:
    """Row tuples → sorted ``Columns`` shaped like DuckDB's (for in-memory stores)."""
    import numpy as np  # the rows' readers and writers need it, a run's options not

    idx = [names.index(k) for k in SORT_KEYS[table]]
    ordered = sorted(rows, key=lambda r: [r[i] for i in idx])
    cols: list[Sequence[Any]] = list(zip(*ordered, strict=True)) or [() for _ in names]
    out: dict[str, Any] = {}
    for name, col in zip(names, cols, strict=True):
        if name in _FLOATS:
            arr = np.array(col, dtype=np.float64)
            out[name] = np.ma.masked_array(arr, np.isnan(arr))
        else:
            out[name] = np.array(col, dtype=object if name in _STRINGS else np.int64)
    return out


def rebuild(
    frames: Columns, stats: Columns, hists: Columns, order: Mapping[int, Sequence[str]]
) -> list[FrameResult]:
    """Sorted columns (see ``SORT_KEYS``) → results, in the order of ``frames``.

    Points come back in the order of ``order[query_id]`` (the query's stats); points it does not
    name follow, those from ``stat`` first, by name. Work is per point, not per row.
    """
    import numpy as np  # the rows' readers and writers need it, a run's options not

    points: dict[Key, list[Point]] = {}
    q, t, f, name = (stats[c].tolist() for c in STAT_COLUMNS[:4])
    stat, value = stats["stat"].tolist(), stats["value"].tolist()
    for s, e in _groups(stats):
        p = _stat_point(name[s], stat[s:e], value[s:e])
        points.setdefault((q[s], t[s], f[s]), []).append(p)
    q, t, f, name, bins, first = (hists[c].tolist() for c in ("query_id", *HIST_COLUMNS[1:5], "hi"))
    # (NULLs come as a masked array's; ``np.ma`` itself is not loaded for a column with none)
    hi, weight = (
        (a.filled(np.nan) if hasattr(a, "filled") else a).tolist()
        for a in (hists["hi"], hists["weight"])
    )
    for s, e in _groups(hists):
        p = _histogram(name[s], bins[s:e], first[s:e], hi[s:e], weight[s:e])
        points.setdefault((q[s], t[s], f[s]), []).append(p)
    out: list[FrameResult] = []
    for q1, t1, f1, start, end, cov in zip(
        *(frames[c].tolist() for c in FRAME_COLUMNS), strict=True
    ):
        rank = {n: i for i, n in reversed(list(enumerate(order.get(q1, ()))))}
        found = sorted(points.get((q1, t1, f1), ()), key=lambda p: rank.get(p.stat, len(rank)))
        out.append(FrameResult(q1, t1, f1, start, end, cov, tuple(found)))
    return out


def _groups(cols: Columns) -> list[tuple[int, int]]:
    """(start, end) of each point's rows: runs of equal (query_id, target, frame, point)."""
    import numpy as np  # the rows' readers and writers need it, a run's options not

    keys = SORT_KEYS["stat"]
    n = len(cols[keys[0]])
    if n == 0:
        return []
    change = np.zeros(n, dtype=bool)
    change[0] = True
    for k in keys:
        a = np.asarray(cols[k])
        change[1:] |= a[1:] != a[:-1]
    starts = np.flatnonzero(change).tolist()
    return list(zip(starts, [*starts[1:], n], strict=True))


def _stat_point(name: str, stats: list[str], values: list[float | None]) -> Point:
    if len(stats) == 1 and stats[0] == name:
        return ScalarPoint(name, values[0])
    prefix = name + "."
    if all(s.startswith(prefix) for s in stats):
        labels = tuple(s[len(prefix) :] for s in stats)
        return DutyPoint(labels, tuple(_num(v) for v in values), name)
    return QuantilesPoint(tuple(quantile_of(s) for s in stats), tuple(values), name)


def _histogram(
    name: str, bins: list[int], first: list[float | None], hi: list[float], w: list[float]
) -> HistogramPoint:
    """Rows sorted by bin: over (-2), under (-1), then bins 0..n-1; ``first`` is ``hi`` with
    NULL kept as ``None`` (an under row whose ``hi`` is NULL means no edges)."""
    i, under, over, edge0 = 0, 0.0, 0.0, None
    if i < len(bins) and bins[i] == OVER_BIN:
        over, i = w[i], i + 1
    if i < len(bins) and bins[i] == UNDER_BIN:
        under, edge0, i = w[i], first[i], i + 1
    edges = () if edge0 is None else (edge0, *hi[i:])
    return HistogramPoint(edges, tuple(w[i:]), under, over, name)


def _num(v: float | None) -> float:
    return float("nan") if v is None else v
