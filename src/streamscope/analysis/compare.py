"""Two runs side by side: what got better, worse, or stayed the same.

In: two ``Run`` objects (A, the baseline, and B). Out: ``compare(run_a, run_b)``, a ``Comparison``
that leads with ``speed`` (``Speed``): whether B is faster than A, slower, the same (within the
tolerance or the frames' own spread) or cannot be told, from the throughput both runs measured
and their durations, said in one plain sentence (``headline``). Its rows (``Delta``) then hold
each figure of A and B, their difference and a verdict:

- run level: status, the headline throughput (higher is better; not counted again), duration
  (lower is better), probe records dropped (lower is better);
- per query, matched by its text and target: every scalar stat over the whole run (``mean`` and
  quantiles: time-weighted mean over frames; ``max``/``min``: the extreme frame; ``count``/``sum``:
  the total) and each duty fraction (``duty.busy``, ...);
- per stage, from ``stage_breakdown``: the categories of Curreri et al. (Performance Analysis
  Framework for High-Level Language Applications in Reconfigurable Computing, 2010)
  computation, communication, other.

Direction: throughput and count higher is better; latency, inter-insertion/-departure times,
occupancy, blocked fractions, causality violations, drops and duration lower is better; busy and
idle fractions are neutral (a change is reported as ``changed``). A change is ``same`` when the
relative change is within ``tolerance`` (default 5 %), or, for fractions of time, when it moves by
no more than ``fraction_tolerance`` (default 0.01) in absolute terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamscope.analysis.breakdown import stage_breakdown
from streamscope.analysis.delta import (
    FRACTION_TOLERANCE,
    TOLERANCE,
    VERDICTS,
    Delta,
    Judge,
    direction,
)
from streamscope.analysis.series import Series, collect, whole_run, whole_run_duty
from streamscope.analysis.speed import Speed, compare_speed
from streamscope.store.reader import Run


@dataclass(frozen=True, slots=True)
class Comparison:
    """Run B against run A. ``speed``: whether B is faster, the headline (``headline``: it in
    one sentence). ``rows`` in order: run, queries (A's order), stages (A's order).
    ``only_a``/``only_b``: queries (``text [target]``) present in one run only."""

    name_a: str
    name_b: str
    path_a: str | None
    path_b: str | None
    tolerance: float
    rows: tuple[Delta, ...]
    only_a: tuple[str, ...] = ()
    only_b: tuple[str, ...] = ()
    fraction_tolerance: float = FRACTION_TOLERANCE
    counts: dict[str, int] = field(default_factory=dict, hash=False)
    speed: Speed | None = None

    @property
    def headline(self) -> str:
        """Whether B is faster than A, in one plain sentence with its figures (``Speed``)."""
        return "" if self.speed is None else self.speed.sentence

    @property
    def summary(self) -> str:
        """One line: ``run B: 3 better, 1 worse, 12 same, 2 changed; 1 query only in A``."""
        c = self.counts
        parts = [f"{c.get(v, 0)} {v}" for v in ("better", "worse", "same", "changed")]
        if c.get("n/a"):
            parts.append(f"{c['n/a']} not comparable")
        line = f"run B ({self.name_b}) against A ({self.name_a}): " + ", ".join(parts)
        extra = []
        if self.only_a:
            extra.append(f"{len(self.only_a)} {_q(len(self.only_a))} only in A")
        if self.only_b:
            extra.append(f"{len(self.only_b)} {_q(len(self.only_b))} only in B")
        return line + ("; " + ", ".join(extra) if extra else "")

    def row(
        self, section: str, stat: str, name: str | None = None, target: str | None = None
    ) -> Delta:
        """The first row matching ``section``, ``stat`` and, when given, ``name`` and ``target``
        (a query row's name is its text; ``KeyError`` if none)."""
        for r in self.rows:
            same_key = r.section == section and r.stat == stat
            if same_key and name in (None, r.name) and target in (None, r.target):
                return r
        raise KeyError((section, stat, name, target))

    def to_dict(self) -> dict[str, Any]:
        """A ``json.dumps``-able dict (no ``NaN``: missing or non-finite numbers are ``None``)."""
        return {
            "a": {"name": self.name_a, "path": self.path_a},
            "b": {"name": self.name_b, "path": self.path_b},
            "headline": self.headline,
            "speed": None if self.speed is None else self.speed.to_dict(),
            "tolerance": self.tolerance,
            "fraction_tolerance": self.fraction_tolerance,
            "summary": self.summary,
            "counts": dict(self.counts),
            "rows": [r.to_dict() for r in self.rows],
            "only_a": list(self.only_a),
            "only_b": list(self.only_b),
        }


def _q(n: int) -> str:
    return "query" if n == 1 else "queries"


def compare(
    run_a: Run,
    run_b: Run,
    *,
    tolerance: float = TOLERANCE,
    fraction_tolerance: float = FRACTION_TOLERANCE,
) -> Comparison:
    """Run B against run A (the baseline); see the module docstring for the rows and verdicts.

    ``tolerance``: the relative change (0.05 = 5 %) within which a figure is ``same``;
    ``fraction_tolerance``: the absolute change within which a fraction of time is ``same``.
    """
    if tolerance < 0 or fraction_tolerance < 0:
        raise ValueError("tolerances must not be negative")
    judge = Judge(tolerance, fraction_tolerance)
    sa, sb = collect(run_a), collect(run_b)
    headline = compare_speed(run_a, run_b, sa, sb, tolerance)
    rows = _run_rows(judge, run_a, run_b, headline)
    query_rows, state_targets = _query_rows(judge, sa, sb)
    rows += query_rows
    rows += _stage_rows(judge, run_a, run_b, sa, sb, state_targets)
    keys_a, keys_b = _query_keys(run_a, sa), _query_keys(run_b, sb)
    counts = dict.fromkeys(VERDICTS, 0)
    for r in rows:
        if r.counted:
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
    return Comparison(
        run_a.meta.name,
        run_b.meta.name,
        None if run_a.path is None else str(run_a.path),
        None if run_b.path is None else str(run_b.path),
        tolerance,
        tuple(rows),
        tuple(f"{t} [{g}]" for (t, g) in keys_a if (t, g) not in keys_b),
        tuple(f"{t} [{g}]" for (t, g) in keys_b if (t, g) not in keys_a),
        fraction_tolerance,
        counts,
        headline,
    )


def _run_rows(judge: Judge, run_a: Run, run_b: Run, headline: Speed) -> list[Delta]:
    """Status, the headline throughput (where shared), duration and dropped probe records."""
    rows = [_status_row(run_a.status, run_b.status)]
    if headline.throughput_a is not None:
        rows.append(_throughput_row(headline, judge.tolerance))
    da, db = run_a.duration_ns, run_b.duration_ns
    rows.append(judge.row("run", "run", "", "duration_ns", "ns", da, db, "lower"))
    dropped_a = sum(d.dropped for d in run_a.drops())
    dropped_b = sum(d.dropped for d in run_b.drops())
    rows.append(
        judge.row("run", "run", "", "dropped_records", "records", dropped_a, dropped_b, "lower")
    )
    return rows


def _keyed(series: Sequence[Series]) -> dict[tuple[str, str], Series]:
    """(query text, target) → its series; the first of duplicates wins."""
    out: dict[tuple[str, str], Series] = {}
    for s in series:
        out.setdefault((s.query.text, s.target), s)
    return out


def _query_keys(run: Run, series: Sequence[Series]) -> dict[tuple[str, str], None]:
    """Every (query text, target) of ``run``: its queries' targets, then targets with frames."""
    keys = dict.fromkeys((q.text, t) for q in run.queries for t in q.targets)
    return keys | dict.fromkeys(_keyed(series))


def _query_rows(
    judge: Judge, sa: Sequence[Series], sb: Sequence[Series]
) -> tuple[list[Delta], set[str]]:
    """The rows of every query both runs share (A's order), and the targets of their shared
    state queries (whose stage rows are then not counted again)."""
    keyed_b = _keyed(sb)
    rows: list[Delta] = []
    state_targets: set[str] = set()
    for key, s_a in _keyed(sa).items():
        s_b = keyed_b.get(key)
        if s_b is None:
            continue
        if s_a.query.metric == "state":
            state_targets.add(s_a.target)
        rows.extend(_one_query_rows(judge, s_a, s_b))
    return rows, state_targets


def _stage_rows(
    judge: Judge,
    run_a: Run,
    run_b: Run,
    sa: Sequence[Series],
    sb: Sequence[Series],
    state_targets: set[str],
) -> list[Delta]:
    """The categories of Curreri et al. (PPW+RC, 2010) of each stage of A that either run
    observed."""
    st_b = {b.stage: b for b in stage_breakdown(run_b, series=sb)}
    rows = []
    for ba in stage_breakdown(run_a, series=sa):
        bb = st_b.get(ba.stage)
        if bb is None or (ba.busy is None and bb.busy is None):
            continue
        counted = ba.stage not in state_targets
        for stat, direc in (
            ("computation", "neutral"),
            ("communication", "lower"),
            ("other", "neutral"),
        ):
            a, b = getattr(ba, stat), getattr(bb, stat)
            rows.append(
                judge.row(
                    "stage", ba.stage, "", stat, "fraction", a, b, direc,
                    fraction=True, counted=counted,
                )
            )  # fmt: skip
    return rows


def _status_row(a: str, b: str) -> Delta:
    if a == b:
        verdict = "same"
    elif b == "completed":
        verdict = "better"
    elif a == "completed":
        verdict = "worse"
    else:
        verdict = "changed"
    return Delta("run", "run", "", "status", "", a, b, None, None, "neutral", verdict)


def _throughput_row(headline: Speed, tolerance: float) -> Delta:
    """The headline throughput as a run row, judged as the headline judges it (within the
    tolerance or the frames' spread: ``same``); not counted, since a query row holds it."""
    a, b, rel = headline.throughput_a, headline.throughput_b, headline.throughput_change
    delta = None if a is None or b is None else b - a
    if rel is None:
        verdict = "n/a"
    elif abs(rel) <= max(tolerance, headline.noise or 0.0):
        verdict = "same"
    else:
        verdict = "better" if rel > 0 else "worse"
    return Delta(
        "run", "run", "", "throughput", "items/s", a, b, delta, rel, "higher", verdict, False
    )


def _duty_whole_run(s: Series) -> dict[str, float | None]:
    d = whole_run_duty(s) or {}
    return {f"duty.{k}": v for k, v in d.items()} | {
        f"duty.{k}": None for k in s.duty_labels if k not in d
    }


def stat_unit(unit: str, stat: str) -> str:
    """The unit of a query's stat: the query's own, but for its figures of quality (a time
    bound in ns, counts of violations or rejected frames, distances in items)."""
    if stat.endswith("_ns"):
        return "ns"
    if stat in ("violations", "rejected") or stat.endswith("_items"):
        return ""
    return unit


def _one_query_rows(judge: Judge, s_a: Series, s_b: Series) -> list[Delta]:
    q = s_a.query
    rows = []
    stats = list(s_a.scalars) + [k for k in s_b.scalars if k not in s_a.scalars]
    for stat in stats:
        va = whole_run(s_a.scalars[stat], s_a.covered, stat) if stat in s_a.scalars else None
        vb = whole_run(s_b.scalars[stat], s_b.covered, stat) if stat in s_b.scalars else None
        unit = stat_unit(q.unit, stat)
        rows.append(
            judge.row("query", q.text, s_a.target, stat, unit, va, vb, direction(q.metric, stat))
        )
    da, db = _duty_whole_run(s_a), _duty_whole_run(s_b)
    rows.extend(
        judge.row(
            "query",
            q.text,
            s_a.target,
            stat,
            "fraction",
            da.get(stat),
            db.get(stat),
            direction(q.metric, stat),
            fraction=True,
        )
        for stat in [*da, *(k for k in db if k not in da)]
    )
    return rows
