"""Query syntax trees: frozen values in, canonical query text out (``str(q)`` parses back equal).

Chaining methods (``q.mean().every("1s")``) return new queries; ``builder`` makes the first one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from streamscope.query.metrics import METRICS
from streamscope.query.units import duration_ns, format_duration, format_number, parse_value

#: A bare name in query text; anything else is printed as a double-quoted string.
NAME_RE = re.compile(r"[A-Za-z_*?](?:[A-Za-z0-9_.*?]|-(?!>))*")


def format_name(name: str) -> str:
    """``name`` as query text: bare when it lexes as one name, else quoted with JSON escapes."""
    if NAME_RE.fullmatch(name):
        return name
    return json.dumps(name, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Edge:
    """The channel(s) from stages matching ``src`` to stages matching ``dst`` (fnmatch patterns)."""

    src: str
    dst: str

    def __str__(self) -> str:
        return f"{format_name(self.src)} -> {format_name(self.dst)}"


@dataclass(frozen=True, slots=True)
class StageRef:
    """The stage(s) whose name matches ``name`` (an fnmatch pattern)."""

    name: str

    def __str__(self) -> str:
        return format_name(self.name)


@dataclass(frozen=True, slots=True)
class Path:
    """From stages matching ``src`` to stages matching ``dst`` (fnmatch patterns), through the
    stages and channels between them: what became of an item that left ``src`` reaching
    ``dst``."""

    src: str
    dst: str

    def __str__(self) -> str:
        return f"{format_name(self.src)} ~> {format_name(self.dst)}"


Target = Edge | StageRef | Path


def _format_value(value: float, time_valued: bool) -> str:
    if time_valued and float(value).is_integer():
        return format_duration(int(value))
    return format_number(value)


@dataclass(frozen=True, slots=True)
class StatAgg:
    """An aggregation without arguments: ``count``, ``sum``, ``min``, ``max``, ``mean``, ``duty``."""

    name: str

    def render(self, time_valued: bool = False) -> str:
        return self.name


@dataclass(frozen=True, slots=True)
class PercentileAgg:
    """A ``pNN`` shorthand: ``percent`` in [0, 100] (``p99.9`` → 99.9)."""

    percent: float

    @property
    def q(self) -> float:
        """The quantile in [0, 1], divided exactly in decimal (``p99.9`` → 0.999, not 0.99900...01)."""
        return float(Decimal(repr(float(self.percent))) / 100)

    def render(self, time_valued: bool = False) -> str:
        return f"p{format_number(self.percent)}"


@dataclass(frozen=True, slots=True)
class QuantilesAgg:
    """``quantiles(q, ...)``, each ``q`` in [0, 1]."""

    qs: tuple[float, ...]

    def render(self, time_valued: bool = False) -> str:
        return f"quantiles({', '.join(format_number(q) for q in self.qs)})"


@dataclass(frozen=True, slots=True)
class HistogramAgg:
    """``histogram`` in one of four forms: bare (the compiler picks bins), ``bins=LO..HI``
    (``levels``: one bin per integer), ``bins=[e0, ...]`` (``edges``), or ``range=LO..HI,
    width=W`` (``span`` and ``width``). Time-valued metrics hold nanoseconds."""

    levels: tuple[int, int] | None = None
    edges: tuple[float, ...] | None = None
    span: tuple[float, float] | None = None
    width: float | None = None

    def render(self, time_valued: bool = False) -> str:
        def f(v: float) -> str:
            return _format_value(v, time_valued)

        args: list[str] = []
        if self.levels is not None:
            args.append(f"bins={self.levels[0]}..{self.levels[1]}")
        if self.edges is not None:
            args.append(f"bins=[{', '.join(f(e) for e in self.edges)}]")
        if self.span is not None:
            args.append(f"range={f(self.span[0])}..{f(self.span[1])}")
        if self.width is not None:
            args.append(f"width={f(self.width)}")
        return f"histogram({', '.join(args)})" if args else "histogram"


Agg = StatAgg | PercentileAgg | QuantilesAgg | HistogramAgg


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a parsed query came from, so later errors (unknown stages) can point into it.

    ``text`` is what ``line``/``columns`` index; ``columns`` hold the 1-based column of the stage
    name, or of the source and destination names. Valid only while the query keeps ``target``.
    """

    text: str
    source: str
    line: int
    target: Target
    columns: tuple[int, ...]


ValueLike = float | str


@dataclass(frozen=True, slots=True)
class Query:
    """Measure ``metric`` of ``target``, reduce with ``aggregations`` (none written: the metric's
    defaults), every ``frame_ns`` nanoseconds (``None``: the run's default frame)."""

    metric: str
    target: Target
    aggregations: tuple[Agg, ...] = ()
    frame_ns: int | None = None
    origin: Origin | None = field(default=None, compare=False, repr=False)

    def __str__(self) -> str:
        info = METRICS.get(self.metric)
        time_valued = info is not None and info.time_valued
        text = f"{self.metric}({self.target})"
        if self.aggregations:
            text += ": " + ", ".join(a.render(time_valued) for a in self.aggregations)
        if self.frame_ns is not None:
            text += f" every {format_duration(self.frame_ns)}"
        return text

    # Chaining: each returns a new query with one more aggregation (or a frame).

    def aggregate(self, *aggs: Agg) -> Query:
        return replace(self, aggregations=self.aggregations + aggs, origin=None)

    def count(self) -> Query:
        return self.aggregate(StatAgg("count"))

    def sum(self) -> Query:
        return self.aggregate(StatAgg("sum"))

    def min(self) -> Query:
        return self.aggregate(StatAgg("min"))

    def max(self) -> Query:
        return self.aggregate(StatAgg("max"))

    def mean(self) -> Query:
        return self.aggregate(StatAgg("mean"))

    def duty(self) -> Query:
        return self.aggregate(StatAgg("duty"))

    def p(self, *percents: float) -> Query:
        """Percentile shorthands: ``q.p(50, 99.9)`` is ``p50, p99.9``."""
        return self.aggregate(*(PercentileAgg(p) for p in percents))

    def quantiles(self, *qs: float) -> Query:
        return self.aggregate(QuantilesAgg(tuple(qs)))

    def histogram(
        self,
        *,
        bins: tuple[int, int] | Sequence[ValueLike] | None = None,
        range: tuple[ValueLike, ValueLike] | None = None,
        width: ValueLike | None = None,
    ) -> Query:
        """``bins=(LO, HI)`` (a 2-tuple of ints): integer levels; ``bins=[e0, e1, ...]``: edges;
        ``range=(LO, HI), width=W``: equal bins. Time metrics accept ``"10ms"`` or int ns."""
        time_valued = self.metric in METRICS and METRICS[self.metric].time_valued
        agg = HistogramAgg()
        if isinstance(bins, tuple) and len(bins) == 2 and all(isinstance(b, int) for b in bins):
            agg = replace(agg, levels=(int(bins[0]), int(bins[1])))
        elif bins is not None:
            agg = replace(agg, edges=tuple(parse_value(e, time_valued) for e in bins))
        if range is not None:
            lo, hi = (parse_value(v, time_valued) for v in range)
            agg = replace(agg, span=(lo, hi))
        if width is not None:
            agg = replace(agg, width=parse_value(width, time_valued))
        return self.aggregate(agg)

    def every(self, duration: str | int) -> Query:
        """Frame length: ``"500ms"``, ``"1s"``, or an int in nanoseconds."""
        return replace(self, frame_ns=duration_ns(duration), origin=None)
