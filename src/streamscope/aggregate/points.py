"""Frozen results of one aggregation over one frame, and a frame's full result row.

Points serialise to plain dicts (JSON-ready: ``None`` where there was no data) and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class ScalarPoint:
    """count, sum, min, max or mean. ``value`` is ``None`` when the frame had no data."""

    stat: str
    value: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"type": "scalar", "stat": self.stat, "value": self.value}


@dataclass(frozen=True, slots=True)
class HistogramPoint:
    """Weights per bin ``[edges[i], edges[i+1])``; ``under``/``over`` fall outside the edges.

    Weights are counts for event metrics and nanoseconds for time-weighted metrics.
    """

    edges: tuple[float, ...]
    weights: tuple[float, ...]
    under: float = 0.0
    over: float = 0.0
    stat: str = "histogram"

    @property
    def total(self) -> float:
        return sum(self.weights) + self.under + self.over

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "histogram",
            "stat": self.stat,
            "edges": list(self.edges),
            "weights": list(self.weights),
            "under": self.under,
            "over": self.over,
        }


@dataclass(frozen=True, slots=True)
class QuantilesPoint:
    """``values[i]`` is the ``qs[i]`` quantile (``None`` with no data)."""

    qs: tuple[float, ...]
    values: tuple[float | None, ...]
    stat: str = "quantiles"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "quantiles",
            "stat": self.stat,
            "qs": list(self.qs),
            "values": list(self.values),
        }


@dataclass(frozen=True, slots=True)
class DutyPoint:
    """Fraction of the observed time spent in each labelled state (sums to 1 with data)."""

    labels: tuple[str, ...]
    fractions: tuple[float, ...]
    stat: str = "duty"

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": "duty",
            "stat": self.stat,
            "labels": list(self.labels),
            "fractions": list(self.fractions),
        }


Point = ScalarPoint | HistogramPoint | QuantilesPoint | DutyPoint


def point_from_dict(d: dict[str, Any]) -> Point:
    """Inverse of ``Point.to_dict``."""
    t = d["type"]
    if t == "scalar":
        return ScalarPoint(d["stat"], d["value"])
    if t == "histogram":
        return HistogramPoint(
            tuple(d["edges"]),
            tuple(d["weights"]),
            d.get("under", 0.0),
            d.get("over", 0.0),
            d["stat"],
        )
    if t == "quantiles":
        return QuantilesPoint(tuple(d["qs"]), tuple(d["values"]), d["stat"])
    if t == "duty":
        return DutyPoint(tuple(d["labels"]), tuple(d["fractions"]), d["stat"])
    raise ValueError(f"unknown point type {t!r}")


@dataclass(frozen=True, slots=True)
class FrameResult:
    """The result of one query for one target over one frame of virtual time.

    ``t_start_ns``/``t_end_ns`` are virtual times relative to the run's start; ``covered_ns`` is
    how much of the frame was observed (less than the frame for the run's first and last frames).
    """

    query_id: int
    target: str
    frame: int
    t_start_ns: int
    t_end_ns: int
    covered_ns: int
    points: tuple[Point, ...]
    #: Live only, never stored: figures across a clock not yet bracketed by a later calibration
    #: (placed by extrapolating the latest fit); the final frame follows once it is.
    provisional: bool = False

    def point(self, stat: str) -> Point:
        for p in self.points:
            if p.stat == stat:
                return p
        raise KeyError(stat)

    def to_dict(self) -> dict[str, Any]:
        return {
            "query_id": self.query_id,
            "target": self.target,
            "frame": self.frame,
            "t_start_ns": self.t_start_ns,
            "t_end_ns": self.t_end_ns,
            "covered_ns": self.covered_ns,
            "points": [p.to_dict() for p in self.points],
            **({"provisional": True} if self.provisional else {}),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FrameResult:
        return cls(
            d["query_id"],
            d["target"],
            d["frame"],
            d["t_start_ns"],
            d["t_end_ns"],
            d["covered_ns"],
            tuple(point_from_dict(p) for p in d["points"]),
            bool(d.get("provisional", False)),
        )


@dataclass(frozen=True, slots=True)
class DropCount:
    """Records a probe refused (``dropped``) and kept (``recorded``) in one frame."""

    probe_id: int
    frame: int
    dropped: int
    recorded: int
