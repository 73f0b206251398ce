"""What a report shows, read from a run with ``Run.sql``: per-query frame series, histograms,
virtual queues, clock fits and calibration exchanges, drop counts.

In: a ``Run``. Out: plain Python structures (lists of floats, dicts) that the figure and page
builders turn into HTML; nothing here formats or escapes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from streamscope.store.reader import Run

#: Stats a virtual queue's occupancy frames carry besides the query's own aggregations.
SELF_CHECK_STATS = ("w1_items", "threshold_items", "clock_bias_items", "rejected")
#: Stats about clocks that a cross-domain channel's frames carry.
CLOCK_STATS = ("uncertainty_ns", "violations")
#: The quantiles a box-whisker summary needs (``box``: 0, 0.25, 0.5, 0.75, 1).
BOX_STATS = ("p0", "p25", "p50", "p75", "p100")
#: Calibration exchanges per domain up to which every exchange is drawn.
MAX_EXCHANGES = 20_000


def _num(v: Any) -> float | None:
    """A stored number as a float, ``None`` for NULL or NaN."""
    if v is None:
        return None
    f = float(v)
    return None if math.isnan(f) else f


@dataclass(slots=True)
class TargetSeries:
    """One query's frames for one target: frame numbers and times, and every stat per frame."""

    target: str
    frames: list[int] = field(default_factory=list)
    t_start_ns: list[int] = field(default_factory=list)
    t_end_ns: list[int] = field(default_factory=list)
    covered_ns: list[int] = field(default_factory=list)
    #: stat name (``mean``, ``p99``, ``duty.busy``, ``w1_items``...) -> value per frame.
    stats: dict[str, list[float | None]] = field(default_factory=dict)
    #: The histogram's edges (of the first frame that has one) and the weights per frame.
    edges: list[float] = field(default_factory=list)
    weights: list[list[float]] = field(default_factory=list)
    under: list[float] = field(default_factory=list)
    over: list[float] = field(default_factory=list)

    def stat(self, name: str) -> list[float | None]:
        return self.stats.get(name, [None] * len(self.frames))


@dataclass(slots=True)
class QuerySeries:
    """A query and its per-target series."""

    id: int
    text: str
    metric: str
    unit: str
    frame_ns: int
    stats: tuple[str, ...]
    targets: list[TargetSeries]


def query_series(run: Run) -> list[QuerySeries]:
    """Every query's frames, stats and histograms, three SQL reads for the whole run."""
    _, frows = run.sql(
        "SELECT query_id, target, frame, t_start_ns, t_end_ns, covered_ns FROM frame "
        "ORDER BY query_id, target, frame"
    )
    _, srows = run.sql("SELECT query_id, target, frame, stat, value FROM stat ORDER BY rowid")
    _, hrows = run.sql(
        "SELECT query_id, target, frame, bin, lo, hi, weight FROM histogram "
        "ORDER BY query_id, target, frame, bin"
    )
    by_key: dict[tuple[int, str], TargetSeries] = {}
    index: dict[tuple[int, str], dict[int, int]] = {}
    for qid, target, frame, t0, t1, cov in frows:
        key = (int(qid), str(target))
        ts = by_key.get(key)
        if ts is None:
            ts = by_key[key] = TargetSeries(str(target))
            index[key] = {}
        index[key][int(frame)] = len(ts.frames)
        ts.frames.append(int(frame))
        ts.t_start_ns.append(int(t0))
        ts.t_end_ns.append(int(t1))
        ts.covered_ns.append(int(cov or 0))
    for qid, target, frame, stat, value in srows:
        key = (int(qid), str(target))
        ts = by_key.get(key)
        if ts is None:
            continue
        i = index[key].get(int(frame))
        if i is None:
            continue
        col = ts.stats.get(str(stat))
        if col is None:
            col = ts.stats[str(stat)] = [None] * len(ts.frames)
        col[i] = _num(value)
    hist: dict[tuple[int, str], dict[int, tuple[list[float], list[float], float, float]]] = (
        defaultdict(dict)
    )
    for qid, target, frame, b, lo, hi, weight in hrows:
        per = hist[(int(qid), str(target))]
        edges, weights, under, over = per.get(int(frame), ([], [], 0.0, 0.0))
        wt = _num(weight) or 0.0
        if b == -1:
            under = wt
        elif b == -2:
            over = wt
        else:
            if not edges:
                edges.append(float(lo))
            edges.append(float(hi))
            weights.append(wt)
        per[int(frame)] = (edges, weights, under, over)
    for key, per in hist.items():
        ts = by_key.get(key)
        if ts is None:
            continue
        edges = next((e for e, _, _, _ in per.values() if e), [])
        ts.edges = edges
        nbins = max(len(edges) - 1, 0)
        for frame in ts.frames:
            e, w, u, o = per.get(frame, ([], [], 0.0, 0.0))
            same = e == edges
            ts.weights.append(w if same else [0.0] * nbins)
            ts.under.append(u if same else u + sum(w))
            ts.over.append(o)
    out = []
    for q in run.queries:
        names = list(q.targets) + sorted(
            t for (qid, t) in by_key if qid == q.id and t not in q.targets
        )
        out.append(
            QuerySeries(
                q.id,
                q.text,
                q.metric,
                q.unit,
                q.frame_ns,
                q.stats,
                [by_key.get((q.id, t)) or TargetSeries(t) for t in names],
            )
        )
    return out


@dataclass(slots=True)
class Levels:
    """One virtual queue's level distributions: series name -> fraction per level, per frame
    (``frames``), and over the whole run (weighted by each frame's observed time)."""

    frames: list[int]
    per_frame: dict[str, dict[int, list[float]]]
    overall: dict[str, list[float]]


def vq_levels(run: Run, query_id: int, target: str) -> Levels:
    """The ``vq_level`` rows of one virtual queue."""
    _, all_rows = run.sql(
        "SELECT l.query_id, l.target, l.frame, l.series, l.level, l.fraction, f.covered_ns "
        "FROM vq_level l LEFT JOIN frame f ON f.query_id = l.query_id "
        "AND f.target = l.target AND f.frame = l.frame ORDER BY l.series, l.frame, l.level"
    )
    rows = [r[2:] for r in all_rows if r[0] == query_id and r[1] == target]
    per: dict[str, dict[int, list[float]]] = defaultdict(dict)
    weight: dict[int, float] = {}
    for frame, series, level, fraction, covered in rows:
        levels = per[str(series)].setdefault(int(frame), [])
        lv = int(level)
        if lv >= len(levels):
            levels.extend([0.0] * (lv + 1 - len(levels)))
        levels[lv] += _num(fraction) or 0.0
        weight[int(frame)] = float(covered or 1.0)
    overall: dict[str, list[float]] = {}
    for series, frames in per.items():
        n = max((len(v) for v in frames.values()), default=0)
        acc = [0.0] * n
        total = 0.0
        for frame, levels in frames.items():
            w = weight.get(frame, 1.0)
            total += w
            for i, x in enumerate(levels):
                acc[i] += x * w
        overall[series] = [x / total for x in acc] if total else acc
    return Levels(sorted(weight), dict(per), overall)


@dataclass(slots=True)
class ClockDomain:
    """A calibrated clock domain: its fits per burst and, when few enough, every exchange."""

    domain: str
    tick_period_ns: float
    fits: list[dict[str, Any]]
    #: Per exchange: burst, host time since the run's start (s), and the exchange's interval
    #: relative to its burst's fit, ``[t1 - fit(t2), t3 - fit(t2)]`` in ns.
    exchanges: dict[str, list[float]] | None
    exchange_count: int


def clock_domains(run: Run) -> list[ClockDomain]:
    """Every domain in ``clock_fit``, with its exchanges from ``calibration`` if not too many."""
    cols, rows = run.sql("SELECT * FROM clock_fit ORDER BY domain, burst")
    if not rows:
        return []
    ticks = {r.clock_domain: r.tick_period_ns for r in run.topology.resources}
    _, counts = run.sql("SELECT domain, count(*) FROM calibration GROUP BY domain")
    n_ex = {str(d): int(n) for d, n in counts}
    fits: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        d = dict(zip(cols, r, strict=True))
        fits[str(d["domain"])].append(d)
    t0 = run.meta.t0_host_ns
    out = []
    for domain, dfits in fits.items():
        exchanges: dict[str, list[float]] | None = None
        count = n_ex.get(domain, 0)
        if 0 < count <= MAX_EXCHANGES:
            _, ex = run.sql(
                "SELECT c.domain, c.burst, c.t1_ns, c.t2_ticks, c.t3_ns, f.x0_ticks, "
                "f.s_ns_per_tick, f.b_ns FROM calibration c JOIN clock_fit f "
                "ON f.domain = c.domain AND f.burst = c.burst ORDER BY c.burst, c.t1_ns"
            )
            exchanges = {"burst": [], "t_s": [], "lo_ns": [], "hi_ns": []}
            for dom, burst, t1, t2, t3, x0, s, b in ex:
                if dom != domain:
                    continue
                fit = float(s) * (int(t2) - int(x0)) + float(b)
                exchanges["burst"].append(float(burst))
                exchanges["t_s"].append((int(t1) - t0) / 1e9)
                exchanges["lo_ns"].append(int(t1) - fit)
                exchanges["hi_ns"].append(int(t3) - fit)
        out.append(ClockDomain(domain, float(ticks.get(domain, 1.0)), dfits, exchanges, count))
    return out


def drops(run: Run) -> list[tuple[str, int, int]]:
    """Per probe that lost records: ``kind target``, records dropped, records kept."""
    _, rows = run.sql(
        "SELECT p.kind, p.target, sum(d.dropped), sum(d.recorded) FROM drops d "
        "LEFT JOIN probe p ON p.id = d.probe_id GROUP BY ALL HAVING sum(d.dropped) > 0 "
        "ORDER BY 3 DESC"
    )
    return [(f"{k or '?'} {t or '?'}", int(dr), int(rc)) for k, t, dr, rc in rows]


def total_records(run: Run) -> tuple[int, int]:
    """Records dropped and kept over the whole run, all probes."""
    _, rows = run.sql("SELECT coalesce(sum(dropped), 0), coalesce(sum(recorded), 0) FROM drops")
    return int(rows[0][0]), int(rows[0][1])
