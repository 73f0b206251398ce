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
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

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

    sa, sb = collect(run_a), collect(run_b)
    speed = _speed(run_a, run_b, sa, sb, tolerance)
    rows.append(_status_row(run_a.status, run_b.status))
    if speed.throughput_a is not None:
        rows.append(_throughput_row(speed, tolerance))
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
        speed,
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


def _throughput_row(speed: Speed, tolerance: float) -> Delta:
    """The headline throughput as a run row, judged as the headline judges it (within the
    tolerance or the frames' spread: ``same``); not counted, since a query row holds it."""
    a, b, rel = speed.throughput_a, speed.throughput_b, speed.throughput_change
    delta = None if a is None or b is None else b - a
    if rel is None:
        verdict = "n/a"
    elif abs(rel) <= max(tolerance, speed.noise or 0.0):
        verdict = "same"
    else:
        verdict = "better" if rel > 0 else "worse"
    return Delta(
        "run", "run", "", "throughput", "items/s", a, b, delta, rel, "higher", verdict, False
    )


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


# --- the headline: is B faster? --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Speed:
    """Whether run B is faster than run A, said plainly: the headline of a comparison.

    ``verdict``: ``faster``, ``slower``, ``same`` (the change is within the tolerance or within
    what the frames' own spread explains), ``mixed`` (on about the same items, the throughput
    and the duration disagree) or ``unknown`` (a run did not complete, or neither figure exists
    in both). ``basis``: ``throughput`` (a throughput query both runs share: the rate the
    pipeline sustained, the fairer figure) or ``duration`` (only when no throughput is shared:
    it says "faster" only if both runs did the same work), ``""`` for neither.
    ``throughput_*``: items/s over the whole run, summed over the query's targets (a pattern
    such as ``throughput(split -> walk*)`` counts all replicas), time-weighted over frames;
    ``items_*``: the items that rate accounts for. ``noise``: the relative change the frames'
    spread could explain (twice the combined standard error of the two means, frames taken as
    independent, which they are not quite: a lower bound), ``None`` with fewer than 3 frames a
    run. Changes are relative to A: ``+0.5`` = 50 % more than A.
    """

    verdict: str
    basis: str
    sentence: str
    throughput_query: str = ""
    throughput_a: float | None = None
    throughput_b: float | None = None
    throughput_change: float | None = None
    noise: float | None = None
    items_a: float | None = None
    items_b: float | None = None
    duration_a_ns: int | None = None
    duration_b_ns: int | None = None
    duration_change: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {f.name: _finite(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class _Rate:
    """A throughput query's total over its targets: per frame, and over the whole run."""

    text: str
    per_s: float
    items: float
    se: float | None  # standard error of per_s from the frames' spread; None: too few frames


def _rate(series: Sequence[_Series]) -> _Rate | None:
    """The whole-run total rate of one throughput query's series (one per target)."""
    totals: dict[int, list[float]] = {}
    for s in series:
        mean = s.scalars.get("mean")
        if mean is None:
            continue
        # One value per frame and target: a handful, not a per-event loop.
        for f, v, c in zip(s.frames.tolist(), mean.tolist(), s.covered.tolist(), strict=True):
            if math.isfinite(v) and c > 0:
                acc = totals.setdefault(int(f), [0.0, 0.0, 0.0])
                acc[0] += v
                acc[1] += c
                acc[2] += 1
    if not totals:
        return None
    v = np.array([t[0] for t in totals.values()])
    w = np.array([t[1] / t[2] for t in totals.values()])  # the frame's mean covered time
    total_w = float(w.sum())
    per_s = float(np.dot(v, w) / total_w)
    se = None
    if len(v) >= 3:
        var = float(np.dot(w, (v - per_s) ** 2) / total_w)
        n_eff = total_w**2 / float(np.dot(w, w))
        se = math.sqrt(var / n_eff)
    return _Rate(series[0].query.text, per_s, float(np.dot(v, w)) / 1e9, se)


def _headline_rate(
    run_a: Run, sa: Sequence[_Series], sb: Sequence[_Series]
) -> tuple[_Rate, _Rate] | None:
    """The throughput query both runs share that best stands for the pipeline's rate: into a
    sink first, then out of a source, then the first; ``None`` when they share none."""
    by_a: dict[str, list[_Series]] = {}
    by_b: dict[str, list[_Series]] = {}
    for series, by in ((sa, by_a), (sb, by_b)):
        for s in series:
            if s.query.metric == "throughput" and "mean" in s.scalars:
                by.setdefault(s.query.text, []).append(s)
    roles = {st.name: st.role for st in run_a.topology.stages}
    ends = {c.name: (roles.get(c.src, ""), roles.get(c.dst, "")) for c in run_a.topology.channels}

    def rank(text: str) -> int:
        pairs = [ends.get(s.target, ("", "")) for s in by_a[text]]
        if any(dst == "sink" for _, dst in pairs):
            return 0
        return 1 if any(src == "source" for src, _ in pairs) else 2

    for text in sorted((t for t in by_a if t in by_b), key=rank):
        ra, rb = _rate(by_a[text]), _rate(by_b[text])
        if ra is not None and rb is not None and ra.per_s > 0:
            return ra, rb
    return None


def _rel(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or a == 0 else (b - a) / abs(a)


def _pc(x: float | None) -> str:
    return "-" if x is None else f"{x * 100:+.0f} %"


def _seconds(ns: float) -> str:
    return f"{ns / 1e9:.3g} s"


def _speed(
    run_a: Run,
    run_b: Run,
    sa: Sequence[_Series],
    sb: Sequence[_Series],
    tolerance: float,
) -> Speed:
    rates = _headline_rate(run_a, sa, sb)
    da, db = run_a.duration_ns, run_b.duration_ns
    dur_ok = bool(da and db and da > 0 and db > 0)
    d_rel = _rel(da, db) if dur_ok else None
    parts: list[str] = []
    t_verdict = d_verdict = ""
    figs: dict[str, Any] = {}
    if rates is not None:
        ra, rb = rates
        rel = _rel(ra.per_s, rb.per_s)
        assert rel is not None  # ra.per_s > 0
        noise = None
        if ra.se is not None and rb.se is not None:
            noise = 2 * math.hypot(ra.se, rb.se) / ra.per_s
        band = max(tolerance, noise or 0.0)
        t_verdict = "same" if abs(rel) <= band else "faster" if rel > 0 else "slower"
        target = ra.text.split("(", 1)[-1].split(")", 1)[0].strip()
        parts.append(
            f"throughput {rb.per_s:,.4g} items/s against {ra.per_s:,.4g} on {target} ({_pc(rel)})"
        )
        figs |= {
            "throughput_query": ra.text,
            "throughput_a": ra.per_s,
            "throughput_b": rb.per_s,
            "throughput_change": rel,
            "noise": noise,
            "items_a": ra.items,
            "items_b": rb.items,
        }
    if dur_ok and d_rel is not None:
        d_verdict = "same" if abs(d_rel) <= tolerance else "faster" if d_rel < 0 else "slower"
        parts.append(f"duration {_seconds(db or 0)} against {_seconds(da or 0)} ({_pc(d_rel)})")
        figs |= {"duration_a_ns": da, "duration_b_ns": db, "duration_change": d_rel}
    figures = "; ".join(parts)
    a_is, b_is = f"run A ({run_a.meta.name})", f"run B ({run_b.meta.name})"
    bad = [
        f"{who} {r.status}"
        for who, r in (("run A", run_a), ("run B", run_b))
        if r.status != "completed"
    ]
    basis = "throughput" if rates is not None else "duration" if d_verdict else ""
    items_a, items_b = figs.get("items_a"), figs.get("items_b")
    same_work = _rel(items_a, items_b)
    like_for_like = same_work is not None and abs(same_work) <= tolerance
    if bad:
        verdict = "unknown"
        sentence = (
            f"Cannot say whether {b_is} is faster than {a_is}: {' and '.join(bad)}, so the "
            "figures cover only part of the work" + (f" ({figures})." if figures else ".")
        )
    elif not basis:
        verdict = "unknown"
        sentence = (
            f"Cannot say whether {b_is} is faster than {a_is}: they share no throughput query "
            "and a run has no duration."
        )
    elif basis == "duration":
        verdict = d_verdict
        sentence = _say(verdict, a_is, b_is, figures, tolerance, how=" by duration alone")
        sentence += (
            " No throughput query is shared by both runs, so this holds only if both did the "
            "same work."
        )
    else:
        verdict = t_verdict
        if like_for_like and d_verdict not in ("", "same", t_verdict) and t_verdict != "same":
            verdict = "mixed"
            sentence = (
                f"{b_is[0].upper()}{b_is[1:]} has the {'higher' if t_verdict == 'faster' else 'lower'}"
                f" throughput but {'took longer' if d_verdict == 'slower' else 'finished sooner'}"
                f" on about the same items as {a_is}: {figures}. Start-up or the last items "
                "decide the duration here."
            )
        else:
            noise = figs.get("noise")
            sentence = _say(verdict, a_is, b_is, figures, tolerance, noise, frames=True)
            if d_verdict and items_a is not None and items_b is not None and not like_for_like:
                sentence += (
                    f" B's throughput accounts for about {items_b:,.0f} items and A's for about "
                    f"{items_a:,.0f}: the durations are not like for like."
                )
    return Speed(verdict, basis, sentence, **figs)


def _say(
    verdict: str,
    a_is: str,
    b_is: str,
    figures: str,
    tolerance: float,
    noise: float | None = None,
    *,
    frames: bool = False,
    how: str = "",
) -> str:
    """The verdict in words; ``frames``: the verdict came from frames, so say how noisy."""
    b_cap = b_is[0].upper() + b_is[1:]
    if verdict in ("faster", "slower"):
        return f"{b_cap} is {verdict} than {a_is}{how}: {figures}."
    within = f"within the {tolerance * 100:g} % tolerance"
    if noise is not None and noise > tolerance:
        within = f"within the frames' own spread (±{noise * 100:.0f} %)"
    elif noise is None and frames:
        within += " (too few frames to gauge their spread)"
    return f"{b_cap} is as fast as {a_is}{how}, {within}: {figures}."
