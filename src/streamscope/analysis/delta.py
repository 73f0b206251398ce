"""One figure of two runs side by side: its two values, their difference, and the verdict.

In: a figure of run A and of run B, with the direction that is better for it. Out: a ``Delta``
(``Judge.row``), ``same`` within the comparison's tolerances; ``direction`` tells which way is
better for each stat of each metric.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from streamscope.analysis.jsonable import plain
from streamscope.query.metrics import METRICS

#: Within this relative change a figure is ``same``.
TOLERANCE = 0.05
#: Within this absolute change a fraction of time is ``same``.
FRACTION_TOLERANCE = 0.01
VERDICTS = ("better", "worse", "same", "changed", "n/a")

_LOWER_STATS = frozenset({"violations", "uncertainty_ns", "rejected", "w1_items"})


def direction(metric: str, stat: str) -> str:
    """``higher``, ``lower`` (is better) or ``neutral`` for ``stat`` of a query on ``metric``."""
    if stat.startswith("duty."):
        return "lower" if stat.startswith("duty.blocked") else "neutral"
    if stat in _LOWER_STATS:
        return "lower"
    if stat in ("threshold_items", "clock_bias_items"):
        return "neutral"
    info = METRICS.get(metric)
    better = info.better if info is not None else "neutral"
    if stat == "count" and better != "higher":
        return "neutral"  # how many events a frame saw: not a quality of its own
    return better


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
            "a": plain(self.a),
            "b": plain(self.b),
            "delta": plain(self.delta),
            "relative": plain(self.relative),
            "direction": self.direction,
            "verdict": self.verdict,
            "counted": self.counted,
        }


@dataclass(frozen=True, slots=True)
class Judge:
    """The verdicts of one comparison: ``row`` judges one figure."""

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
        """``a`` against ``b`` (missing or not finite: ``n/a``); ``direc``: which way is
        better; ``fraction``: a fraction of time, also ``same`` within the fraction tolerance."""
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
