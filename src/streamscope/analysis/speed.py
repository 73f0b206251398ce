"""The headline of a comparison: is run B faster than run A, said in one plain sentence.

In: runs A (the baseline) and B and their ``Series``. Out: ``compare_speed(...)``, a ``Speed``: a verdict
from the throughput query both runs share that best stands for the pipeline's rate (or, without
one, from their durations), its figures, and the sentence that says it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from streamscope.analysis.jsonable import plain
from streamscope.analysis.series import Series
from streamscope.store.reader import Run

#: With this many frames or more, a run's spread is that of all but its first and last frame.
STEADY_FROM = 5


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
    independent, which they are not quite: a lower bound; of ``STEADY_FROM`` frames or more,
    all but the first and the last), ``None`` with fewer than 3 frames a run. Changes are
    relative to A: ``+0.5`` = 50 % more than A.
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
        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class _Rate:
    """A throughput query's total over its targets: per frame, and over the whole run."""

    text: str
    per_s: float
    items: float
    se: float | None  # standard error of per_s from the frames' spread; None: too few frames


@dataclass(frozen=True, slots=True)
class _Reading:
    """What one figure (throughput or duration) says: its verdict, its sentence part, and the
    ``Speed`` fields it fills."""

    verdict: str
    part: str
    figures: dict[str, Any]


def compare_speed(
    run_a: Run, run_b: Run, sa: Sequence[Series], sb: Sequence[Series], tolerance: float
) -> Speed:
    """Whether ``run_b`` is faster than ``run_a`` (``sa``, ``sb``: their series); ``tolerance``:
    the relative change within which they are as fast."""
    rates = _headline_rate(run_a, sa, sb)
    by_rate = None if rates is None else _by_throughput(*rates, tolerance)
    by_time = _by_duration(run_a.duration_ns, run_b.duration_ns, tolerance)
    readings = [r for r in (by_rate, by_time) if r is not None]
    figs = {k: v for r in readings for k, v in r.figures.items()}
    figures = "; ".join(r.part for r in readings)
    a_is, b_is = f"run A ({run_a.meta.name})", f"run B ({run_b.meta.name})"
    bad = [
        f"{who} {r.status}"
        for who, r in (("run A", run_a), ("run B", run_b))
        if r.status != "completed"
    ]
    if bad:
        sentence = (
            f"Cannot say whether {b_is} is faster than {a_is}: {' and '.join(bad)}, so the "
            "figures cover only part of the work" + (f" ({figures})." if figures else ".")
        )
        return Speed("unknown", _basis(by_rate, by_time), sentence, **figs)
    if by_rate is not None:
        verdict, sentence = _throughput_verdict(by_rate, by_time, a_is, b_is, figures, tolerance)
        return Speed(verdict, "throughput", sentence, **figs)
    if by_time is not None:
        sentence = _say(by_time.verdict, a_is, b_is, figures, tolerance, how=" by duration alone")
        sentence += (
            " No throughput query is shared by both runs, so this holds only if both did the "
            "same work."
        )
        return Speed(by_time.verdict, "duration", sentence, **figs)
    sentence = (
        f"Cannot say whether {b_is} is faster than {a_is}: they share no throughput query "
        "and a run has no duration."
    )
    return Speed("unknown", "", sentence, **figs)


def _basis(by_rate: _Reading | None, by_time: _Reading | None) -> str:
    return "throughput" if by_rate is not None else "duration" if by_time is not None else ""


def _by_throughput(ra: _Rate, rb: _Rate, tolerance: float) -> _Reading:
    """The shared throughput's verdict: ``same`` within the tolerance or the frames' spread."""
    rel = _rel(ra.per_s, rb.per_s)
    assert rel is not None  # ra.per_s > 0
    noise = None
    if ra.se is not None and rb.se is not None:
        noise = 2 * math.hypot(ra.se, rb.se) / ra.per_s
    band = max(tolerance, noise or 0.0)
    verdict = "same" if abs(rel) <= band else "faster" if rel > 0 else "slower"
    target = ra.text.split("(", 1)[-1].split(")", 1)[0].strip()
    part = f"throughput {rb.per_s:,.4g} items/s against {ra.per_s:,.4g} on {target} ({_pc(rel)})"
    figures = {
        "throughput_query": ra.text,
        "throughput_a": ra.per_s,
        "throughput_b": rb.per_s,
        "throughput_change": rel,
        "noise": noise,
        "items_a": ra.items,
        "items_b": rb.items,
    }
    return _Reading(verdict, part, figures)


def _by_duration(da: int | None, db: int | None, tolerance: float) -> _Reading | None:
    """The durations' verdict; ``None`` when a run has no duration."""
    if not (da and db and da > 0 and db > 0):
        return None
    d_rel = (db - da) / abs(da)
    verdict = "same" if abs(d_rel) <= tolerance else "faster" if d_rel < 0 else "slower"
    part = f"duration {_seconds(db)} against {_seconds(da)} ({_pc(d_rel)})"
    return _Reading(
        verdict, part, {"duration_a_ns": da, "duration_b_ns": db, "duration_change": d_rel}
    )


def _throughput_verdict(
    by_rate: _Reading,
    by_time: _Reading | None,
    a_is: str,
    b_is: str,
    figures: str,
    tolerance: float,
) -> tuple[str, str]:
    """(verdict, sentence) from the throughput, with what the durations add: ``mixed`` where
    they disagree on about the same items, a note where the items differ."""
    t_verdict, d_verdict = by_rate.verdict, "" if by_time is None else by_time.verdict
    items_a, items_b = by_rate.figures["items_a"], by_rate.figures["items_b"]
    same_work = _rel(items_a, items_b)
    like_for_like = same_work is not None and abs(same_work) <= tolerance
    if like_for_like and d_verdict not in ("", "same", t_verdict) and t_verdict != "same":
        return "mixed", (
            f"{b_is[0].upper()}{b_is[1:]} has the {'higher' if t_verdict == 'faster' else 'lower'}"
            f" throughput but {'took longer' if d_verdict == 'slower' else 'finished sooner'}"
            f" on about the same items as {a_is}: {figures}. Start-up or the last items "
            "decide the duration here."
        )
    noise = by_rate.figures["noise"]
    sentence = _say(t_verdict, a_is, b_is, figures, tolerance, noise, frames=True)
    if d_verdict and not like_for_like:
        sentence += (
            f" B's throughput accounts for about {items_b:,.0f} items and A's for about "
            f"{items_a:,.0f}: the durations are not like for like."
        )
    return t_verdict, sentence


def _rate(series: Sequence[Series]) -> _Rate | None:
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
    order = sorted(totals)
    v = np.array([totals[f][0] for f in order])
    w = np.array([totals[f][1] / totals[f][2] for f in order])  # the frame's mean covered time
    total_w = float(w.sum())
    per_s = float(np.dot(v, w) / total_w)
    se: float | None = None
    if len(v) >= 3:
        # The spread is the steady frames': a run's first and last frames hold its start and
        # its drain, a change of rate that is no noise (the flagship's 16 walks drain at 0.6 of
        # their rate and then 0 in their last two frames; beside a busy core its spread came
        # to +-42 %, and a change of +34 % was said to be within it).
        sv, sw = (v[1:-1], w[1:-1]) if len(v) >= STEADY_FROM else (v, w)
        steady = float(np.dot(sv, sw) / sw.sum())
        var = float(np.dot(sw, (sv - steady) ** 2) / sw.sum())
        n_eff = float(sw.sum()) ** 2 / float(np.dot(sw, sw))
        se = math.sqrt(var / n_eff)
    return _Rate(series[0].query.text, per_s, float(np.dot(v, w)) / 1e9, se)


def _headline_rate(
    run_a: Run, sa: Sequence[Series], sb: Sequence[Series]
) -> tuple[_Rate, _Rate] | None:
    """The throughput query both runs share that best stands for the pipeline's rate: into a
    sink first, then out of a source, then the first; ``None`` when they share none."""
    by_a: dict[str, list[Series]] = {}
    by_b: dict[str, list[Series]] = {}
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
