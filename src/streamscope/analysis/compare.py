"""Two runs side by side: what got better, worse, or stayed the same.

In: two ``Run`` objects (A, the baseline, and B). Out: ``compare(run_a, run_b)``, a ``Comparison``
whose rows (``Delta``) hold each figure of A and B, their difference and a verdict:

- run level: status, duration (lower is better), probe records dropped (lower is better);
- per query, matched by its text and target: every scalar stat over the whole run (``mean`` and
  quantiles: time-weighted mean over frames; ``max``/``min``: the extreme frame; ``count``/``sum``:
  the total) and each duty fraction (``duty.busy``, ...);
- per stage, from ``stage_breakdown``: the seed-003 categories computation, communication, other.

Direction: throughput and count higher is better; latency, inter-insertion/-departure times,
occupancy, blocked fractions, causality violations, drops and duration lower is better; busy and
idle fractions are neutral (a change is reported as ``changed``). A change is ``same`` when the
relative change is within ``tolerance`` (default 5 %), or, for fractions of time, when it moves by
no more than ``fraction_tolerance`` (default 0.01) in absolute terms.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamscope.analysis.breakdown import (
    _Series,
    _stage_breakdown,
    collect,
    whole_run,
    whole_run_duty,
)
from streamscope.store.reader import Run

TOLERANCE = 0.05
FRACTION_TOLERANCE = 0.01
VERDICTS = ("better", "worse", "same", "changed", "n/a")

_LOWER_METRICS = frozenset({"latency", "interinsertion", "interdeparture", "occupancy"})
_HIGHER_METRICS = frozenset({"throughput", "count"})
_LOWER_STATS = frozenset({"violations", "uncertainty_ns", "rejected", "w1_items"})


def direction(metric: str, stat: str) -> str:
    """``higher``, ``lower`` (is better) or ``neutral`` for ``stat`` of a query on ``metric``."""
    if stat.startswith("duty."):
        return "lower" if stat.startswith("duty.blocked") else "neutral"
    if stat in _LOWER_STATS:
        return "lower"
    if stat in ("threshold_items", "clock_bias_items"):
        return "neutral"
    if stat == "count" and metric not in _HIGHER_METRICS:
        return "neutral"  # how many events a frame saw: not a quality of its own
    if metric in _HIGHER_METRICS:
        return "higher"
    if metric in _LOWER_METRICS:
        return "lower"
    return "neutral"


@dataclass(frozen=True, slots=True)
class Delta:
    """One figure of runs A and B. ``section``: ``run``, ``query`` or ``stage``; ``name``: the
    run field, the query text or the stage; ``target``: the query's target (``""`` otherwise);
    ``stat``: the figure (``mean``, ``p99``, ``duty.busy``, ``duration_ns``, ``communication``).
    ``delta`` = b - a, ``relative`` = delta / |a| (``None`` when a is 0 or either is missing or
    not a number). ``direction``: ``higher``/``lower`` is better or ``neutral``. ``verdict``:
    ``better``/``worse``/``same``, ``changed`` (a neutral figure that moved) or ``n/a`` (missing
    in a run). ``counted``: part of the overall summary (stage rows restating a state query that
    both runs share are not counted twice).
    """

    section: str
    name: str
    target: str
    stat: str
    unit: str
    a: float | str | None
    b: float | str | None
    delta: float | None
    relative: float | None
    direction: str
    verdict: str
    counted: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {
            "section": self.section,
            "name": self.name,
            "target": self.target,
            "stat": self.stat,
            "unit": self.unit,
            "a": _finite(self.a),
            "b": _finite(self.b),
            "delta": _finite(self.delta),
            "relative": _finite(self.relative),
            "direction": self.direction,
            "verdict": self.verdict,
            "counted": self.counted,
        }


@dataclass(frozen=True, slots=True)
class Comparison:
    """Run B against run A. ``rows`` in order: run, queries (A's order), stages (A's order).
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


def _finite(x: float | str | None) -> float | str | None:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


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
    judge = _Judge(tolerance, fraction_tolerance)
    rows: list[Delta] = []

    rows.append(_status_row(run_a.status, run_b.status))
    rows.append(
        judge.row(
            "run", "run", "", "duration_ns", "ns", run_a.duration_ns, run_b.duration_ns, "lower"
        )
    )
    rows.append(
        judge.row(
            "run",
            "run",
            "",
            "dropped_records",
            "records",
            sum(d.dropped for d in run_a.drops()),
            sum(d.dropped for d in run_b.drops()),
            "lower",
        )
    )

    sa, sb = collect(run_a), collect(run_b)
    keyed_a = _keyed(sa)
    keyed_b = _keyed(sb)
    matched_state_stages: set[str] = set()
    for key, s_a in keyed_a.items():
        s_b = keyed_b.get(key)
        if s_b is None:
            continue
        if s_a.query.metric == "state":
            matched_state_stages.add(s_a.target)
        rows.extend(_query_rows(judge, s_a, s_b))
    all_a, all_b = _query_keys(run_a, keyed_a), _query_keys(run_b, keyed_b)
    only_a = tuple(f"{t} [{g}]" for (t, g) in all_a if (t, g) not in all_b)
    only_b = tuple(f"{t} [{g}]" for (t, g) in all_b if (t, g) not in all_a)

    st_b = {b.stage: b for b in _stage_breakdown(run_b, sb)}
    for ba in _stage_breakdown(run_a, sa):
        bb = st_b.get(ba.stage)
        if bb is None or (ba.busy is None and bb.busy is None):
            continue
        counted = ba.stage not in matched_state_stages
        for stat, direc in (
            ("computation", "neutral"),
            ("communication", "lower"),
            ("other", "neutral"),
        ):
            rows.append(
                judge.row(
                    "stage",
                    ba.stage,
                    "",
                    stat,
                    "fraction",
                    getattr(ba, stat),
                    getattr(bb, stat),
                    direc,
                    fraction=True,
                    counted=counted,
                )
            )

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
        only_a,
        only_b,
        fraction_tolerance,
        counts,
    )


def _keyed(series: Sequence[_Series]) -> dict[tuple[str, str], _Series]:
    """(query text, target) → its series; the first of duplicates wins."""
    out: dict[tuple[str, str], _Series] = {}
    for s in series:
        out.setdefault((s.query.text, s.target), s)
    return out


def _query_keys(run: Run, keyed: dict[tuple[str, str], _Series]) -> dict[tuple[str, str], None]:
    """Every (query text, target) of ``run``: its queries' targets, then targets with frames."""
    keys = dict.fromkeys((q.text, t) for q in run.queries for t in q.targets)
    return keys | dict.fromkeys(keyed)


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


def _duty_whole_run(s: _Series) -> dict[str, float | None]:
    d = whole_run_duty(s) or {}
    return {f"duty.{k}": v for k, v in d.items()} | {
        f"duty.{k}": None for k in s.duty_labels if k not in d
    }


def _query_rows(judge: _Judge, s_a: _Series, s_b: _Series) -> list[Delta]:
    q = s_a.query
    rows = []
    stats = list(s_a.scalars) + [k for k in s_b.scalars if k not in s_a.scalars]
    for stat in stats:
        va = whole_run(s_a.scalars[stat], s_a.covered, stat) if stat in s_a.scalars else None
        vb = whole_run(s_b.scalars[stat], s_b.covered, stat) if stat in s_b.scalars else None
        rows.append(
            judge.row("query", q.text, s_a.target, stat, q.unit, va, vb, direction(q.metric, stat))
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


@dataclass(frozen=True, slots=True)
class _Judge:
    tolerance: float
    fraction_tolerance: float

    def row(
        self,
        section: str,
        name: str,
        target: str,
        stat: str,
        unit: str,
        a: float | None,
        b: float | None,
        direc: str,
        *,
        fraction: bool = False,
        counted: bool = True,
    ) -> Delta:
        a = None if a is None or not math.isfinite(a) else float(a)
        b = None if b is None or not math.isfinite(b) else float(b)
        if a is None or b is None:
            return Delta(section, name, target, stat, unit, a, b, None, None, direc, "n/a", counted)
        delta = b - a
        relative = delta / abs(a) if a != 0 else (0.0 if b == 0 else None)
        same = (relative is not None and abs(relative) <= self.tolerance) or (
            fraction and abs(delta) <= self.fraction_tolerance
        )
        if same:
            verdict = "same"
        elif direc == "neutral":
            verdict = "changed"
        elif (delta > 0) == (direc == "higher"):
            verdict = "better"
        else:
            verdict = "worse"
        return Delta(
            section, name, target, stat, unit, a, b, delta, relative, direc, verdict, counted
        )
