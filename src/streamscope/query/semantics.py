"""A lark parse tree in, a checked :class:`Query` out: metric, target kind, aggregations, frame.

Every rule of the language that does not need the topology is enforced here, with a position.
"""

from __future__ import annotations

import difflib
import itertools
import json
import math
import re
from decimal import Decimal, DecimalException
from typing import Any

from lark import Token, Tree

from streamscope.core.errors import QueryError
from streamscope.query.ast import (
    Agg,
    Edge,
    HistogramAgg,
    Origin,
    Path,
    PercentileAgg,
    QuantilesAgg,
    Query,
    StageRef,
    StatAgg,
    Target,
)
from streamscope.query.metrics import (
    AGGREGATION_FORMS,
    MAX_BINS,
    METRIC_NAMES,
    METRICS,
    SIMPLE_AGGREGATIONS,
    MetricInfo,
)
from streamscope.query.units import DURATION_HINT, DurationError, to_ns

_PERCENTILE_RE = re.compile(r"p(\d+(?:\.\d+)?)")
_HISTOGRAM_FORMS = "bins=LO..HI, bins=[e0, e1, ...] or range=LO..HI, width=W"


def _suggest(word: str, choices: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(word, choices, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _token(node: Tree[Any] | Token) -> Token:
    assert isinstance(node, Token)
    return node


def _first_token(node: Tree[Any] | Token) -> Token:
    while isinstance(node, Tree):
        node = node.children[0]
    assert isinstance(node, Token)
    return node


class TreeReader:
    """Reads query trees parsed from ``text``; errors point into ``text`` (lines + offset)."""

    def __init__(self, text: str, source: str, line_offset: int) -> None:
        self.text = "\n" * line_offset + text
        self.raw = text
        self.source = source
        self.line_offset = line_offset

    def error(self, message: str, at: Tree[Any] | Token) -> QueryError:
        token = _first_token(at)
        return QueryError(
            message,
            text=self.text,
            line=(token.line or 1) + self.line_offset,
            column=token.column or 1,
            source=self.source,
        )

    def query(self, tree: Tree[Any]) -> Query:
        metric_token = _token(tree.children[0])
        target_tree, *rest = tree.children[1:]
        metric = str(metric_token)
        if metric not in METRICS:
            raise self.error(
                f"unknown metric '{metric}'; valid metrics: {', '.join(METRIC_NAMES)}"
                + _suggest(metric, METRIC_NAMES),
                metric_token,
            )
        info = METRICS[metric]
        target, name_tokens = self.target(info, target_tree)
        aggs: tuple[Agg, ...] = ()
        frame_ns: int | None = None
        for part in rest:
            if part.data == "aggregations":
                aggs = self.aggregations(info, part.children)
            else:
                frame_ns = self.frame(part.children[0])
        origin = Origin(
            text=self.text,
            source=self.source,
            line=(metric_token.line or 1) + self.line_offset,
            target=target,
            columns=tuple(t.column or 1 for t in name_tokens),
        )
        return Query(metric, target, aggs, frame_ns, origin=origin)

    # -- target ------------------------------------------------------------------------------

    def target(self, info: MetricInfo, tree: Tree[Any]) -> tuple[Target, list[Token]]:
        tokens = [_first_token(child) for child in tree.children]
        names = [self.name(t) for t in tokens]
        if tree.data == "path":
            target: Target = Path(names[0], names[1])
            if not info.on_path:
                raise self.error(
                    f"{info.name} is not measured along a path: only latency(SRC ~> DST) "
                    f"follows items from one stage to another",
                    tokens[0],
                )
        elif tree.data == "edge":
            target = Edge(names[0], names[1])
            if not info.on_edge:
                what = f"a {info.probe} probe" if info.probe else "a stage"
                arg = "STAGE.NAME" if info.probe else "STAGE"
                raise self.error(
                    f"{info.name} measures {what}: expected {info.name}({arg}), "
                    f"found a channel '{target}'",
                    tokens[0],
                )
        else:
            target = StageRef(names[0])
            if info.on_edge:
                raise self.error(
                    f"{info.name} measures a channel: expected {info.name}(SRC -> DST), "
                    f"found a stage name '{target}'",
                    tokens[0],
                )
        return target, tokens

    def name(self, token: Token) -> str:
        if token.type == "NAME":
            return str(token)
        try:
            name = json.loads(str(token))
        except ValueError:
            raise self.error(
                f'bad quoted name {token}: inside quotes use \\" for a quote and \\\\ for a '
                "backslash",
                token,
            ) from None
        if not isinstance(name, str) or not name:
            raise self.error("empty stage name: expected a name inside the quotes", token)
        return name

    # -- aggregations ------------------------------------------------------------------------

    def aggregations(self, info: MetricInfo, trees: list[Tree[Any]]) -> tuple[Agg, ...]:
        aggs: list[Agg] = []
        seen: set[str] = set()
        qs_seen: set[float] = set()
        for tree in trees:
            agg = self.aggregation(info, tree)
            token = _first_token(tree)
            key = "quantiles" if isinstance(agg, PercentileAgg | QuantilesAgg) else token.value
            if key != "quantiles" and key in seen:
                raise self.error(f"'{key}' appears twice in this query", token)
            seen.add(key)
            qs: tuple[float, ...] = (agg.q,) if isinstance(agg, PercentileAgg) else ()
            qs = agg.qs if isinstance(agg, QuantilesAgg) else qs
            for q in qs:
                if q in qs_seen:
                    raise self.error(f"the quantile {q:g} is asked for twice", token)
                qs_seen.add(q)
            aggs.append(agg)
        return tuple(aggs)

    def aggregation(self, info: MetricInfo, tree: Tree[Any]) -> Agg:
        name_token = _token(tree.children[0])
        args = tree.children[1:]
        name = str(name_token)
        percentile = _PERCENTILE_RE.fullmatch(name)
        known = name in (*SIMPLE_AGGREGATIONS, "quantiles", "histogram") or percentile
        if not known:
            valid = "duty" if info.name == "state" else ", ".join(AGGREGATION_FORMS)
            raise self.error(
                f"unknown aggregation '{name}'; valid for {info.name}: {valid}"
                + _suggest(name, (*SIMPLE_AGGREGATIONS, "quantiles", "histogram")),
                name_token,
            )
        if name == "duty" and info.name != "state":
            raise self.error("'duty' only applies to state queries", name_token)
        if info.name == "state" and name != "duty":
            raise self.error(f"state queries take only 'duty', not '{name}'", name_token)
        if name == "quantiles":
            return self.quantiles(name_token, args)
        if name == "histogram":
            return self.histogram(info, name_token, args)
        if args:
            raise self.error(f"'{name}' takes no arguments", args[0])
        if percentile:
            percent = float(percentile.group(1))
            if percent > 100:
                raise self.error(
                    f"bad percentile '{name}': expected p0 to p100, e.g. p99.9", name_token
                )
            return PercentileAgg(percent)
        return StatAgg(name)

    def quantiles(self, name_token: Token, args: list[Tree[Any]]) -> QuantilesAgg:
        usage = "quantiles takes numbers between 0 and 1, e.g. quantiles(0.5, 0.99)"
        if not args:
            raise self.error(usage, name_token)
        qs: list[float] = []
        for arg in args:
            value = arg.children[-1]
            if (
                arg.data != "posarg"
                or value.data != "scalar"
                or len(value.children[0].children) > 1
            ):
                raise self.error(usage, arg)
            q = float(str(_first_token(value)))
            if not 0.0 <= q <= 1.0:
                raise self.error(f"quantile {_first_token(value)} is outside 0..1; {usage}", arg)
            qs.append(q)
        return QuantilesAgg(tuple(qs))

    def histogram(self, info: MetricInfo, name_token: Token, args: list[Tree[Any]]) -> HistogramAgg:
        kwargs: dict[str, Tree[Any]] = {}
        for arg in args:
            if arg.data != "kwarg":
                raise self.error(f"histogram takes {_HISTOGRAM_FORMS}", arg)
            key = str(arg.children[0])
            if key not in ("bins", "range", "width"):
                raise self.error(
                    f"unknown histogram argument '{key}'; histogram takes {_HISTOGRAM_FORMS}", arg
                )
            if key in kwargs:
                raise self.error(f"'{key}=' appears twice in this histogram", arg)
            kwargs[key] = arg.children[1]
        if not kwargs:
            if not info.levels or info.name != "occupancy":
                raise self.error(
                    f"a bare 'histogram' has no bins for {info.name}: "
                    "give range=LO..HI and width=W (or bins=[e0, e1, ...])",
                    name_token,
                )
            return HistogramAgg()
        if "bins" in kwargs:
            if len(kwargs) > 1:
                raise self.error("give either bins= or range= with width=, not both", name_token)
            return self.bins(info, kwargs["bins"])
        if "range" not in kwargs or "width" not in kwargs:
            raise self.error("histogram range=LO..HI needs width=W as well", name_token)
        span, width = kwargs["range"], kwargs["width"]
        if span.data != "span":
            raise self.error("range= takes LO..HI", span)
        if width.data != "scalar":
            raise self.error("width= takes one number", width)
        lo, hi = (self.value(info, n) for n in span.children)
        w = self.value(info, width.children[0])
        if hi < lo:
            raise self.error(f"histogram range {lo:g}..{hi:g} runs backwards", span)
        if w <= 0:
            raise self.error("histogram width must be greater than zero", width)
        if (hi - lo) // w + 1 > MAX_BINS:
            raise self.error(f"histogram has more than {MAX_BINS} bins; widen width=", width)
        return HistogramAgg(span=(lo, hi), width=w)

    def bins(self, info: MetricInfo, value: Tree[Any]) -> HistogramAgg:
        if value.data == "span":
            if not info.levels:
                raise self.error(
                    "bins=LO..HI makes one bin per integer level (occupancy, count); "
                    f"for {info.name} give range=LO..HI, width=W or bins=[e0, e1, ...]",
                    value,
                )
            lo, hi = (self.value(info, n) for n in value.children)
            if not (isinstance(lo, int) and isinstance(hi, int)):
                raise self.error("bins=LO..HI takes whole numbers", value)
            if hi < lo:
                raise self.error(f"histogram levels {lo}..{hi} run backwards", value)
            if hi - lo + 1 > MAX_BINS:
                raise self.error(f"histogram has more than {MAX_BINS} levels", value)
            return HistogramAgg(levels=(lo, hi))
        if value.data != "items":
            raise self.error(
                f"bins= takes LO..HI or [e0, e1, ...]; histogram takes {_HISTOGRAM_FORMS}", value
            )
        edges = tuple(self.value(info, n) for n in value.children)
        if len(edges) < 2 or any(b <= a for a, b in itertools.pairwise(edges)):
            raise self.error(
                "histogram edges must be at least two strictly increasing numbers", value
            )
        if len(edges) > MAX_BINS + 1:
            raise self.error(f"histogram has more than {MAX_BINS} bins", value)
        return HistogramAgg(edges=edges)

    # -- numbers and durations ---------------------------------------------------------------

    def value(self, info: MetricInfo, number: Tree[Any]) -> float:
        """A histogram value: ``int`` ns for time-valued metrics, else the number as written."""
        digits = str(number.children[0])
        unit = number.children[1:]
        if info.time_valued:
            return self.nanoseconds(number, str(unit[0]) if unit else "ns")
        if unit:
            raise self.error(
                f"'{self.slice(number)}' is a duration, but {info.name} is measured in "
                f"{info.unit}: expected a plain number",
                unit[0],
            )
        # Whole numbers stay ints (exact levels); beyond 2**53 a float is what the user meant.
        try:
            exact = Decimal(digits)
            whole = exact == exact.to_integral_value() and "." not in digits and abs(exact) < 2**53
        except DecimalException:  # an exponent past what Decimal holds: not a level anyway
            whole = False
        if whole:
            return int(exact)
        try:
            value = float(digits)
        except ValueError:
            raise self.error(f"'{digits}' is not a number", number) from None
        if not math.isfinite(value):
            raise self.error(f"'{digits}' is too large a number", number)
        return value

    def frame(self, number: Tree[Any]) -> int:
        if len(number.children) < 2:
            raise self.error(f"bad duration '{self.slice(number)}': {DURATION_HINT}", number)
        ns = self.nanoseconds(number, str(number.children[1]))
        if ns <= 0:
            raise self.error(
                f"bad duration '{self.slice(number)}': must be greater than zero", number
            )
        return ns

    def nanoseconds(self, number: Tree[Any], unit: str) -> int:
        try:
            return to_ns(str(number.children[0]), unit)
        except DurationError as e:
            raise self.error(f"bad duration '{self.slice(number)}': {e}", number) from None

    def slice(self, tree: Tree[Any]) -> str:
        first, last = _token(tree.children[0]), _token(tree.children[-1])
        return self.raw[first.start_pos or 0 : last.end_pos or 0]
