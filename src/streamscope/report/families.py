"""Many targets alike taken together: past ``FAMILY_AT``, the queues and workers a program made
as it went (``maker -> taker``, ``maker -> taker #2``, ...) are shown one per family.

In: names, or a ``QuerySeries``. Out: the families (name -> members, in the order first seen),
their members' numbers written compactly, and a ``QuerySeries`` with one ``TargetSeries`` per
family: per frame, its mean the members' each on average (weighted by the time each observed,
as the terminal summary does), its max the largest, its min the smallest, counts and sums and
histogram weights added, a stage family's time in each state the average of its workers.
Quantiles are left out: those of several targets do not add up to the family's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from streamscope.core.topology import FAMILY_AT, family
from streamscope.report.data import QuerySeries, TargetSeries

#: The numbers ``family`` strips from a name (one per numbered end).
_NUMBER = re.compile(r" #(\d+)(?= -> |$)")

#: How a family's figure per frame comes from its members', in words for its legend.
HOW = {
    "mean": "each on average",
    "max": "max: the largest",
    "min": "min: the smallest",
    "count": "count: all together",
    "sum": "sum: all together",
    "uncertainty_ns": "the largest",
    "violations": "all together",
    "histogram": "their weights added",
}

Values = list[tuple[float, float]]


def families(names: Sequence[str], at: int = FAMILY_AT) -> dict[str, list[str]]:
    """Family -> its members, in the order first seen; past ``at`` names only (at or under it,
    each name is a family of its own, whatever its number)."""
    if len(names) <= at:
        return {n: [n] for n in names}
    out: dict[str, list[str]] = {}
    for n in names:
        out.setdefault(family(n), []).append(n)
    return out


def noun(target: str, metric: str) -> str:
    """What a family's members are, for its label."""
    if " -> " in target:
        return "channels"
    return "stages" if metric == "state" else "targets"


def about(ts: TargetSeries, metric: str, stat: str = "") -> str:
    """A target's name in a figure; a family's with how many it stands for and how its
    figure comes from theirs (``maker -> taker (300 channels, each on average)``)."""
    if ts.members <= 1:
        return ts.target
    how = HOW.get(stat, "each on average" if stat.startswith("duty.") else "together")
    return f"{ts.target} ({ts.members} {noun(ts.target, metric)}, {how})"


def numbers(names: Sequence[str]) -> str:
    """Members of one family written compactly: those numbered alike by their numbers, runs
    of consecutive ones as ranges (``#2–#41, #43``); any other by its whole name."""
    numbered: list[int] = []
    others: list[str] = []
    for n in names:
        found = set(_NUMBER.findall(n))
        if len(found) == 1:
            numbered.append(int(found.pop()))
        else:
            others.append(n)
    runs: list[tuple[int, int]] = []
    for k in sorted(set(numbered)):
        if runs and runs[-1][1] == k - 1:
            runs[-1] = (runs[-1][0], k)
        else:
            runs.append((k, k))
    return ", ".join([*others, *(f"#{a}" if a == b else f"#{a}–#{b}" for a, b in runs)])


def grouped(q: QuerySeries) -> QuerySeries:
    """``q`` with one series per family past ``FAMILY_AT`` targets (a family of one keeps its
    own); ``q`` itself at or under it."""
    fams = families([t.target for t in q.targets])
    if all(len(m) == 1 for m in fams.values()):
        return q
    by = {t.target: t for t in q.targets}
    targets = [
        by[ms[0]] if len(ms) == 1 else together(fam, [by[m] for m in ms])
        for fam, ms in fams.items()
    ]
    return replace(q, targets=targets)


def together(name: str, members: Sequence[TargetSeries]) -> TargetSeries:
    """One series for the family ``name`` of ``members``, frame by frame (a frame some lived
    in, the others not: of those that did)."""
    frames = sorted({f for m in members for f in m.frames})
    at = {f: i for i, f in enumerate(frames)}
    rows: list[list[tuple[TargetSeries, int]]] = [[] for _ in frames]
    for m in members:
        for k, f in enumerate(m.frames):
            rows[at[f]].append((m, k))
    names = list(dict.fromkeys(s for m in members for s in m.stats))
    duty = [s for s in names if s.startswith("duty.")]
    # a stage's time in each state: of the workers observed in the frame (all 0: it was not)
    seen = (
        [[(m, k) for m, k in r if sum(m.stat(s)[k] or 0.0 for s in duty)] for r in rows]
        if duty
        else rows
    )
    stats: dict[str, list[float | None]] = {}
    for stat in names:
        combine = _combiner(stat)
        if combine is not None:
            of = seen if stat in duty else rows
            stats[stat] = [combine(_values(r, stat)) for r in of]
    return TargetSeries(
        name,
        frames,
        [min(m.t_start_ns[k] for m, k in r) for r in rows],
        [max(m.t_end_ns[k] for m, k in r) for r in rows],
        [max(m.covered_ns[k] for m, k in r) for r in rows],
        stats,
        *_histograms(members, at),
        members=len(members),
    )


def _values(row: Sequence[tuple[TargetSeries, int]], stat: str) -> Values:
    """The members' values of ``stat`` in one frame, each with the time it observed."""
    out: Values = []
    for m, k in row:
        col = m.stats.get(stat)
        if col is not None and col[k] is not None:
            out.append((float(col[k]), m.covered_ns[k]))  # type: ignore[arg-type]
    return out


def weighted_mean(vals: Values) -> float | None:
    """Weighted by the time each observed (a plain mean if none says)."""
    if not vals:
        return None
    den = sum(w for _, w in vals)
    if den <= 0:
        return sum(v for v, _ in vals) / len(vals)
    return sum(v * w for v, w in vals) / den


def _combiner(stat: str) -> Callable[[Values], float | None] | None:
    """How a stat of the family comes from its members' (``None``: it is left out)."""
    if stat == "mean" or stat.startswith("duty."):
        return weighted_mean
    if stat in ("max", "uncertainty_ns"):
        return lambda vals: max((v for v, _ in vals), default=None)
    if stat == "min":
        return lambda vals: min((v for v, _ in vals), default=None)
    if stat in ("count", "sum", "violations"):
        return lambda vals: sum(v for v, _ in vals) if vals else None
    return None


def _histograms(
    members: Sequence[TargetSeries], at: dict[int, int]
) -> tuple[list[float], list[list[float]], list[float], list[float]]:
    """The members' histograms added frame by frame, on the first one's bins (a member binned
    otherwise counts all its weight below the range, as a frame binned otherwise does)."""
    edges = next((list(m.edges) for m in members if m.edges and m.weights), [])
    if not edges:
        return [], [], [], []
    nb = len(edges) - 1
    weights = np.zeros((len(at), nb))
    under = np.zeros(len(at))
    over = np.zeros(len(at))
    for m in members:
        if not m.weights:
            continue
        rows = np.fromiter((at[f] for f in m.frames), dtype=np.int64, count=len(m.frames))
        w = np.asarray(m.weights, dtype=np.float64).reshape(len(m.frames), -1)
        np.add.at(over, rows, np.asarray(m.over, dtype=np.float64))
        np.add.at(under, rows, np.asarray(m.under, dtype=np.float64))
        if list(m.edges) == edges:
            np.add.at(weights, rows, w[:, :nb])
        else:
            np.add.at(under, rows, w.sum(axis=1))
    return edges, weights.tolist(), under.tolist(), over.tolist()
