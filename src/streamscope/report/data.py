"""What a report shows, read from a run with ``Run.sql``: per-query frame series, histograms,
virtual queues, clock fits and calibration exchanges, drop counts.

In: a ``Run``. Out: frozen series of plain numbers (``QuerySeries``, ``Levels``,
``ClockDomain``) that the figure and page builders turn into HTML; nothing here formats or
escapes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamscope.store.reader import Run

#: Stats a virtual queue's occupancy frames carry besides the query's own aggregations.
SELF_CHECK_STATS = (
    "w1_items", "threshold_items", "clock_bias_items", "rejected", "excess_items",
    "tolerance_items", "band_items",
)  # fmt: skip
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


@dataclass(frozen=True, slots=True)
class TargetSeries:
    """One query's frames for one target: frame numbers and times, and every stat per frame."""

    target: str
    frames: Sequence[int] = ()
    t_start_ns: Sequence[int] = ()
    t_end_ns: Sequence[int] = ()
    covered_ns: Sequence[int] = ()
    #: stat name (``mean``, ``p99``, ``duty.busy``, ``w1_items``...) -> value per frame.
    stats: Mapping[str, Sequence[float | None]] = field(default_factory=dict)
    #: The histogram's edges (of the first frame that has one) and the weights per frame.
    edges: Sequence[float] = ()
    weights: Sequence[Sequence[float]] = ()
    under: Sequence[float] = ()
    over: Sequence[float] = ()
    #: How many targets it stands for: past ``FAMILY_AT``, a family of numbered ones taken
    #: together (``families.together``); 1 for a target shown on its own.
    members: int = 1

    def stat(self, name: str) -> Sequence[float | None]:
        return self.stats.get(name, [None] * len(self.frames))


@dataclass(frozen=True, slots=True)
class QuerySeries:
    """A query and its per-target series."""

    id: int
    text: str
    metric: str
    unit: str
    frame_ns: int
    stats: tuple[str, ...]
    targets: Sequence[TargetSeries]


#: A query's id and a target's name: what frames, stats and histograms are keyed by.
Key = tuple[int, str]


@dataclass(slots=True)
class _Columns:
    """One target's frames and stats while the run's rows are read (then a ``TargetSeries``)."""

    frames: list[int] = field(default_factory=list)
    t_start_ns: list[int] = field(default_factory=list)
    t_end_ns: list[int] = field(default_factory=list)
    covered_ns: list[int] = field(default_factory=list)
    #: frame number -> its index in the columns
    at: dict[int, int] = field(default_factory=dict)
    stats: dict[str, list[float | None]] = field(default_factory=dict)


@dataclass(slots=True)
class _Bins:
    """One frame's histogram while its rows are read."""

    edges: list[float] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    under: float = 0.0
    over: float = 0.0


def query_series(run: Run) -> list[QuerySeries]:
    """Every query's frames, stats and histograms, three SQL reads for the whole run."""
    columns = _read_frames(run)
    _read_stats(run, columns)
    hist = _read_histograms(run)
    out = []
    for q in run.queries:
        extra = sorted(t for (qid, t) in columns if qid == q.id and t not in q.targets)
        targets = [
            _series(t, columns.get((q.id, t)), hist.get((q.id, t))) for t in [*q.targets, *extra]
        ]
        out.append(QuerySeries(q.id, q.text, q.metric, q.unit, q.frame_ns, q.stats, targets))
    return out


def _read_frames(run: Run) -> dict[Key, _Columns]:
    _, rows = run.sql(
        "SELECT query_id, target, frame, t_start_ns, t_end_ns, covered_ns FROM frame "
        "ORDER BY query_id, target, frame"
    )
    columns: dict[Key, _Columns] = {}
    for qid, target, frame, t0, t1, cov in rows:
        key = (int(qid), str(target))
        c = columns.get(key)
        if c is None:
            c = columns[key] = _Columns()
        c.at[int(frame)] = len(c.frames)
        c.frames.append(int(frame))
        c.t_start_ns.append(int(t0))
        c.t_end_ns.append(int(t1))
        c.covered_ns.append(int(cov or 0))
    return columns


def _read_stats(run: Run, columns: dict[Key, _Columns]) -> None:
    """Each stat's value into its frame's place (stats of frames not read are left out)."""
    _, rows = run.sql("SELECT query_id, target, frame, stat, value FROM stat ORDER BY rowid")
    for qid, target, frame, stat, value in rows:
        c = columns.get((int(qid), str(target)))
        i = None if c is None else c.at.get(int(frame))
        if c is None or i is None:
            continue
        col = c.stats.get(str(stat))
        if col is None:
            col = c.stats[str(stat)] = [None] * len(c.frames)
        col[i] = _num(value)


def _read_histograms(run: Run) -> dict[Key, dict[int, _Bins]]:
    """Per target, each frame's histogram (bin -1: below the range, -2: above it)."""
    _, rows = run.sql(
        "SELECT query_id, target, frame, bin, lo, hi, weight FROM histogram "
        "ORDER BY query_id, target, frame, bin"
    )
    hist: dict[Key, dict[int, _Bins]] = defaultdict(dict)
    for qid, target, frame, b, lo, hi, weight in rows:
        per = hist[(int(qid), str(target))]
        bins = per.get(int(frame))
        if bins is None:
            bins = per[int(frame)] = _Bins()
        wt = _num(weight) or 0.0
        if b == -1:
            bins.under = wt
        elif b == -2:
            bins.over = wt
        else:
            if not bins.edges:
                bins.edges.append(float(lo))
            bins.edges.append(float(hi))
            bins.weights.append(wt)
    return hist


def _series(target: str, c: _Columns | None, hist: dict[int, _Bins] | None) -> TargetSeries:
    """A target's series: its columns, and its histograms on one set of bins (a frame binned
    otherwise than the first counts all its weight below the range)."""
    if c is None:
        return TargetSeries(target)
    if not hist:
        return TargetSeries(target, c.frames, c.t_start_ns, c.t_end_ns, c.covered_ns, c.stats)
    edges = next((b.edges for b in hist.values() if b.edges), [])
    nbins = max(len(edges) - 1, 0)
    weights: list[list[float]] = []
    under: list[float] = []
    over: list[float] = []
    for frame in c.frames:
        b = hist.get(frame) or _Bins()
        same = b.edges == edges
        weights.append(b.weights if same else [0.0] * nbins)
        under.append(b.under if same else b.under + sum(b.weights))
        over.append(b.over)
    return TargetSeries(
        target, c.frames, c.t_start_ns, c.t_end_ns, c.covered_ns, c.stats,
        edges, weights, under, over,
    )  # fmt: skip


@dataclass(frozen=True, slots=True)
class Levels:
    """One virtual queue's level distributions: series name -> fraction per level, per frame
    (``frames``), and over the whole run (weighted by each frame's observed time)."""

    frames: Sequence[int]
    per_frame: Mapping[str, Mapping[int, Sequence[float]]]
    overall: Mapping[str, Sequence[float]]


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


@dataclass(frozen=True, slots=True)
class ClockDomain:
    """A calibrated clock domain: its fits per burst and, when few enough, every exchange."""

    domain: str
    tick_period_ns: float
    fits: Sequence[Mapping[str, Any]]
    #: Per exchange: burst, host time since the run's start (s), and the exchange's interval
    #: relative to its burst's fit, ``[t1 - fit(t2), t3 - fit(t2)]`` in ns.
    exchanges: Mapping[str, Sequence[float]] | None
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
    out = []
    for domain, dfits in fits.items():
        count = n_ex.get(domain, 0)
        exchanges = _exchanges(run, domain) if 0 < count <= MAX_EXCHANGES else None
        out.append(ClockDomain(domain, float(ticks.get(domain, 1.0)), dfits, exchanges, count))
    return out


def _exchanges(run: Run, domain: str) -> dict[str, list[float]]:
    """A domain's calibration exchanges, each relative to its burst's fit."""
    _, ex = run.sql(
        "SELECT c.domain, c.burst, c.t1_ns, c.t2_ticks, c.t3_ns, f.x0_ticks, "
        "f.s_ns_per_tick, f.b_ns FROM calibration c JOIN clock_fit f "
        "ON f.domain = c.domain AND f.burst = c.burst ORDER BY c.burst, c.t1_ns"
    )
    t0 = run.meta.t0_host_ns
    exchanges: dict[str, list[float]] = {"burst": [], "t_s": [], "lo_ns": [], "hi_ns": []}
    for dom, burst, t1, t2, t3, x0, s, b in ex:
        if dom != domain:
            continue
        fit = float(s) * (int(t2) - int(x0)) + float(b)
        exchanges["burst"].append(float(burst))
        exchanges["t_s"].append((int(t1) - t0) / 1e9)
        exchanges["lo_ns"].append(int(t1) - fit)
        exchanges["hi_ns"].append(int(t3) - fit)
    return exchanges


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
