"""Round trips of the query language: any valid query prints to text that parses back equal, and
printing is a fixed point; arbitrary text never escapes as anything but a QueryError."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from streamscope.core.errors import QueryError
from streamscope.query import (
    METRICS,
    Agg,
    Edge,
    HistogramAgg,
    PercentileAgg,
    QuantilesAgg,
    Query,
    StageRef,
    StatAgg,
    format_duration,
    parse_duration,
    parse_queries,
    parse_query,
)
from streamscope.query.metrics import MetricInfo

bare_names = st.from_regex(r"[A-Za-z_*?][A-Za-z0-9_.*?-]{0,12}", fullmatch=True).filter(
    lambda s: "->" not in s
)
names = st.one_of(bare_names, st.text(min_size=1, max_size=12))

floats = st.floats(min_value=0.0, max_value=1e300, allow_nan=False, allow_infinity=False)


@st.composite
def histograms(draw: st.DrawFn, info: MetricInfo) -> HistogramAgg:
    forms = ["edges", "range"] + ["levels"] * info.levels + ["bare"] * (info.name == "occupancy")
    form = draw(st.sampled_from(forms))
    if form == "bare":
        return HistogramAgg()
    if form == "levels":
        lo = draw(st.integers(0, 10_000))
        return HistogramAgg(levels=(lo, lo + draw(st.integers(0, 1_000))))
    if form == "edges":
        values = st.integers(0, 10**15) if info.time_valued else floats
        edges = draw(st.lists(values, min_size=2, max_size=6, unique=True))
        return HistogramAgg(edges=tuple(sorted(edges)))
    bins = draw(st.integers(0, 1_000))
    if info.time_valued:
        lo, width = draw(st.integers(0, 10**12)), draw(st.integers(1, 10**9))
    else:
        lo = draw(st.floats(0.0, 1e12))
        width = draw(st.floats(1e-3, 1e6))
    return HistogramAgg(span=(lo, lo + bins * width), width=width)


def _quantiles_of(agg: Agg) -> tuple[float, ...]:
    if isinstance(agg, PercentileAgg):
        return (agg.q,)
    return agg.qs if isinstance(agg, QuantilesAgg) else ()


@st.composite
def aggregation_lists(draw: st.DrawFn, info: MetricInfo) -> tuple[Agg, ...]:
    if info.name == "state":
        return draw(st.sampled_from([(), (StatAgg("duty"),)]))
    simple = draw(st.lists(st.sampled_from(["count", "sum", "min", "max", "mean"]), unique=True))
    aggs: list[Agg] = [StatAgg(name) for name in simple]
    aggs += [PercentileAgg(p) for p in draw(st.lists(st.floats(0.0, 100.0), max_size=3))]
    if draw(st.booleans()):
        qs = draw(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=4, unique=True))
        aggs.append(QuantilesAgg(tuple(qs)))
    if draw(st.booleans()):
        aggs.append(draw(histograms(info)))
    qs_all = [q for agg in aggs for q in _quantiles_of(agg)]
    assume(len(qs_all) == len(set(qs_all)))  # the language refuses a quantile asked for twice
    return tuple(draw(st.permutations(aggs)))


@st.composite
def queries(draw: st.DrawFn) -> Query:
    info = METRICS[draw(st.sampled_from(sorted(METRICS)))]
    target = Edge(draw(names), draw(names)) if info.on_edge else StageRef(draw(names))
    frame = draw(st.none() | st.integers(1, 10**15))
    return Query(info.name, target, draw(aggregation_lists(info)), frame)


@given(queries())
def test_printed_queries_parse_back_equal(query: Query) -> None:
    text = str(query)
    assert parse_query(text) == query
    assert str(parse_query(text)) == text


@given(st.lists(queries(), max_size=5))
def test_a_file_of_printed_queries_parses_back_in_order(items: list[Query]) -> None:
    text = "# generated\n" + "\n\n".join(f"{q}  # {i}" for i, q in enumerate(items))
    assert parse_queries(text) == items


UNITS_NS = {"ns": 1, "us": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9}


@given(st.integers(1, 10**18))
def test_durations_print_in_the_largest_exact_unit_and_parse_back(ns: int) -> None:
    text = format_duration(ns)
    assert parse_duration(text) == ns
    unit = text.lstrip("0123456789")
    assert int(text[: -len(unit)]) * UNITS_NS[unit] == ns
    assert all(ns % size for size in UNITS_NS.values() if size > UNITS_NS[unit])


def _check_parse_or_error(text: str) -> None:
    """Parsing either succeeds or fails with a QueryError whose position lies inside ``text``."""
    error: QueryError | None = None
    try:
        parse_query(text)
    except QueryError as e:
        error = e
    if error is not None:
        lines = text.split("\n")
        assert error.line is not None
        assert error.column is not None
        assert 1 <= error.line <= len(lines)
        assert 1 <= error.column <= len(lines[error.line - 1]) + 1


@given(st.text(max_size=60))
def test_any_text_parses_or_raises_query_error(text: str) -> None:
    _check_parse_or_error(text)


@given(queries(), st.integers(0, 200), st.text(max_size=8))
def test_a_damaged_query_parses_or_raises_query_error(query: Query, at: int, junk: str) -> None:
    text = str(query)
    cut = at % (len(text) + 1)
    _check_parse_or_error(text[:cut] + junk + text[cut + 1 :])


#: Numbers at the edges: huge, tiny, negative, with every unit (or none) after them.
_EDGE_NUMBERS = (
    "1E1000000000000000000",  # an exponent past what Decimal holds (was a decimal traceback)
    "1e400",
    "-1e400",
    "1e-400",
    "9223372036854775808",
    "1e18",
    "0",
    "-0",
    "1e308",
    "0.5",
)
_EDGE_UNITS = ("", "ns", "us", "ms", "s", "m")
_EDGE_FORMS = (
    "latency(a -> b): histogram(range={x}..{y}, width={z}) every {w}",
    "occupancy(a -> b): histogram(range={x}..{y}, width={z})",
    "occupancy(a -> b): histogram(bins={x}..{y})",
    "interinsertion(a -> b): histogram(bins=[{x}, {y}, {z}])",
    "occupancy(a -> b): quantiles({x}, {y}) every {w}",
)


@pytest.mark.parametrize("form", _EDGE_FORMS)
def test_numbers_at_the_edges_parse_or_raise_query_error(form: str) -> None:
    """Each edge number in each place of each form, the others ordinary: every one of them."""
    plain = {"x": "1", "y": "2", "z": "1", "w": "1s"}
    for place in plain:
        for n in _EDGE_NUMBERS:
            for u in _EDGE_UNITS:
                _check_parse_or_error(form.format(**{**plain, place: n + u}))
