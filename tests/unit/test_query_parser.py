"""The query language: parsing, canonical printing, builders, and every error's position and words."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamscope.core.errors import QueryError
from streamscope.query import (
    Edge,
    HistogramAgg,
    PercentileAgg,
    QuantilesAgg,
    Query,
    StageRef,
    StatAgg,
    as_query,
    count,
    format_duration,
    interdeparture,
    interinsertion,
    latency,
    occupancy,
    parse_duration,
    parse_queries,
    parse_query,
    state,
    throughput,
)

MS = 1_000_000
S = 1_000_000_000

EXAMPLES = [
    (
        "occupancy(source -> server): histogram(bins=0..64) every 1s",
        Query("occupancy", Edge("source", "server"), (HistogramAgg(levels=(0, 64)),), S),
    ),
    (
        "throughput(split -> walk*): mean, max every 500ms",
        Query("throughput", Edge("split", "walk*"), (StatAgg("mean"), StatAgg("max")), 500 * MS),
    ),
    ("state(server): duty every 1s", Query("state", StageRef("server"), (StatAgg("duty"),), S)),
    (
        "latency(source -> server): mean, p50, p99, histogram(range=0..10ms, width=100us)",
        Query(
            "latency",
            Edge("source", "server"),
            (
                StatAgg("mean"),
                PercentileAgg(50),
                PercentileAgg(99),
                HistogramAgg(span=(0, 10 * MS), width=100_000),
            ),
        ),
    ),
    (
        "interinsertion(source -> server): mean, quantiles(0.5, 0.9)",
        Query(
            "interinsertion",
            Edge("source", "server"),
            (StatAgg("mean"), QuantilesAgg((0.5, 0.9))),
        ),
    ),
    ("count(a -> b): sum every 2s", Query("count", Edge("a", "b"), (StatAgg("sum"),), 2 * S)),
]


@pytest.mark.parametrize(("text", "expected"), EXAMPLES)
def test_examples_parse_to_their_trees_and_print_back(text: str, expected: Query) -> None:
    query = parse_query(text)
    assert query == expected
    assert str(query) == text


def test_a_file_of_examples_parses_in_order_with_comments_and_blank_lines() -> None:
    text = "# queries for the demo\n\n" + "\n".join(f"{t}  # note" for t, _ in EXAMPLES) + "\n\n"
    assert parse_queries(text) == [q for _, q in EXAMPLES]
    assert parse_queries("") == []
    assert parse_queries("# nothing here\n\n") == []


def test_no_aggregations_parse_to_none_written() -> None:
    assert parse_query("occupancy(a -> b)") == Query("occupancy", Edge("a", "b"))
    assert parse_query("  state(s) every 1s  ") == Query("state", StageRef("s"), (), S)


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("7ns", 7),
        ("3us", 3_000),
        ("3µs", 3_000),
        ("3μs", 3_000),
        ("1.5ms", 1_500_000),
        ("2 s", 2 * S),
        ("0.25s", 250 * MS),
        ("2m", 120 * S),
        ("1e3ms", S),
    ],
)
def test_durations_convert_to_nanoseconds(text: str, ns: int) -> None:
    assert parse_query(f"state(a) every {text}").frame_ns == ns
    assert parse_duration(text) == ns


@pytest.mark.parametrize(
    ("ns", "text"),
    [(60 * S, "1m"), (90 * S, "90s"), (1500 * MS, "1500ms"), (1_000, "1us"), (1_001, "1001ns")],
)
def test_durations_print_in_the_largest_exact_unit(ns: int, text: str) -> None:
    assert format_duration(ns) == text
    assert str(Query("state", StageRef("a"), (), ns)) == f"state(a) every {text}"


@pytest.mark.parametrize(
    ("text", "target"),
    [
        ("occupancy(a->b)", Edge("a", "b")),
        ("occupancy(a-b.c -> d_e)", Edge("a-b.c", "d_e")),
        ("occupancy(* -> ?x*)", Edge("*", "?x*")),
        ('occupancy("my stage" -> "quote\\"d")', Edge("my stage", 'quote"d')),
        ("state(every)", StageRef("every")),
        ('state("a -> b")', StageRef("a -> b")),
    ],
)
def test_names_bare_quoted_and_globbed(text: str, target: Edge | StageRef) -> None:
    query = parse_query(text)
    assert query.target == target
    assert parse_query(str(query)) == query


def test_histogram_forms_keep_their_values() -> None:
    query = parse_query("latency(a -> b): histogram(bins=[0, 1.5us, 1ms, 2000000000])")
    assert query.aggregations == (HistogramAgg(edges=(0, 1_500, MS, 2 * S)),)
    assert str(query) == "latency(a -> b): histogram(bins=[0, 1500ns, 1ms, 2s])"
    query = parse_query("throughput(a -> b): histogram(range=0..1000, width=12.5)")
    assert query.aggregations == (HistogramAgg(span=(0, 1000), width=12.5),)
    assert parse_query("occupancy(a -> b): histogram()").aggregations == (HistogramAgg(),)


def test_percentile_shorthand_divides_exactly() -> None:
    (agg,) = parse_query("latency(a -> b): p99.9").aggregations
    assert agg == PercentileAgg(99.9)
    assert isinstance(agg, PercentileAgg)
    assert agg.q == 0.999


# (text, line, column, message): every kind of mistake, where it is reported and how it reads.
ERRORS = [
    (
        "ocupancy(source -> server)",
        1,
        1,
        "unknown metric 'ocupancy'; valid metrics: occupancy, throughput, count, interinsertion, "
        "interdeparture, latency, state, iteration, input_wait, output_wait, sample, counter, "
        "timer; did you mean 'occupancy'?",
    ),
    (
        "occupancy(source server)",
        1,
        18,
        "expected '->', '~>' or ')' after 'source', found 'server'",
    ),
    ("occupancy(source => server)", 1, 18, "expected '->', '~>' or ')' after 'source', found '='"),
    ("occupancy(source -> server", 1, 27, "expected ')' after 'server', found end of line"),
    ("occupancy", 1, 10, "expected '(' after 'occupancy', found end of line"),
    ("occupancy()", 1, 11, "expected a stage name after '(', found ')'"),
    (
        "(a -> b)",
        1,
        1,
        "expected a metric (occupancy, throughput, count, interinsertion, interdeparture, "
        "latency, state, iteration, input_wait, output_wait, sample, counter, timer), found '('",
    ),
    (
        "occupancy(a -> b) mean",
        1,
        19,
        "expected ':', 'every' or end of line after ')', found 'mean'",
    ),
    (
        "occupancy(a -> b): every 1s",
        1,
        20,
        "expected an aggregation (count, sum, min, max, mean, duty, pNN, quantiles, histogram) "
        "after ':', found 'every'",
    ),
    (
        "occupancy(a -> b): mean,",
        1,
        25,
        "expected an aggregation (count, sum, min, max, mean, duty, pNN, quantiles, histogram) "
        "after ',', found end of line",
    ),
    (
        "occupancy(a -> b): mean every",
        1,
        30,
        "expected a duration such as 500ms or 1s after 'every', found end of line",
    ),
    (
        "occupancy(a -> b) every 1s every 2s",
        1,
        28,
        "expected end of line after '1s', found 'every'",
    ),
    (
        "latency(a -> b): histogram(range=0..1ms, width=1",
        1,
        49,
        "expected a unit (ns, us, ms, s or m), '..', ',' or ')' after '1', found end of line",
    ),
    ("latency(a -> b) @", 1, 17, "expected ':', 'every' or end of line after ')', found '@'"),
    (
        "occupancy(a -> b) every 5 parsecs",
        1,
        25,
        "bad duration '5 parsecs': use a number with ns, us, ms, s or m",
    ),
    ("occupancy(a -> b) every 5", 1, 25, "bad duration '5': use a number with ns, us, ms, s or m"),
    ("occupancy(a -> b) every 0s", 1, 25, "bad duration '0s': must be greater than zero"),
    (
        "occupancy(a -> b) every 1.5ns",
        1,
        25,
        "bad duration '1.5ns': must be a whole number of nanoseconds",
    ),
    ("occupancy(a -> b): duty", 1, 20, "'duty' only applies to state queries"),
    ("state(server): mean", 1, 16, "state queries take only 'duty', not 'mean'"),
    ("state(server): p99", 1, 16, "state queries take only 'duty', not 'p99'"),
    (
        "state(a -> b)",
        1,
        7,
        "state measures a stage: expected state(STAGE), found a channel 'a -> b'",
    ),
    (
        "occupancy(server)",
        1,
        11,
        "occupancy measures a channel: expected occupancy(SRC -> DST), found a stage name 'server'",
    ),
    (
        "latency(a -> b): avg",
        1,
        18,
        "unknown aggregation 'avg'; valid for latency: count, sum, min, max, mean, first, last, box, "
        "pNN (e.g. p99), quantiles(q, ...), histogram(...)",
    ),
    ("latency(a -> b): mean, mean", 1, 24, "'mean' appears twice in this query"),
    ("latency(a -> b): p50, quantiles(0.5)", 1, 23, "the quantile 0.5 is asked for twice"),
    ("latency(a -> b): p101", 1, 18, "bad percentile 'p101': expected p0 to p100, e.g. p99.9"),
    ("latency(a -> b): mean(3)", 1, 23, "'mean' takes no arguments"),
    (
        "latency(a -> b): quantiles()",
        1,
        18,
        "quantiles takes numbers between 0 and 1, e.g. quantiles(0.5, 0.99)",
    ),
    (
        "latency(a -> b): quantiles(1.5)",
        1,
        28,
        "quantile 1.5 is outside 0..1; quantiles takes numbers between 0 and 1, "
        "e.g. quantiles(0.5, 0.99)",
    ),
    (
        "latency(a -> b): histogram",
        1,
        18,
        "a bare 'histogram' has no bins for latency: give range=LO..HI and width=W "
        "(or bins=[e0, e1, ...])",
    ),
    (
        "latency(a -> b): histogram(bins=0..5)",
        1,
        33,
        "bins=LO..HI makes one bin per integer level (occupancy, count); for latency give "
        "range=LO..HI, width=W or bins=[e0, e1, ...]",
    ),
    (
        "occupancy(a -> b): histogram(bins=0..5ms)",
        1,
        39,
        "'5ms' is a duration, but occupancy is measured in items: expected a plain number",
    ),
    ("occupancy(a -> b): histogram(bins=0.5..5)", 1, 35, "bins=LO..HI takes whole numbers"),
    ("occupancy(a -> b): histogram(bins=5..2)", 1, 35, "histogram levels 5..2 run backwards"),
    (
        "occupancy(a -> b): histogram(range=0..5)",
        1,
        20,
        "histogram range=LO..HI needs width=W as well",
    ),
    (
        "occupancy(a -> b): histogram(bins=[3, 2])",
        1,
        36,
        "histogram edges must be at least two strictly increasing numbers",
    ),
    (
        "occupancy(a -> b): histogram(range=0..5, width=0.0000001)",
        1,
        48,
        "histogram has more than 100000 bins; widen width=",
    ),
    (
        "occupancy(a -> b): histogram(range=0..5, width=0)",
        1,
        48,
        "histogram width must be greater than zero",
    ),
    (
        "occupancy(a -> b): histogram(bins=0..5, width=3)",
        1,
        20,
        "give either bins= or range= with width=, not both",
    ),
    (
        "occupancy(a -> b): histogram(0..5)",
        1,
        30,
        "histogram takes bins=LO..HI, bins=[e0, e1, ...] or range=LO..HI, width=W",
    ),
    (
        "occupancy(a -> b): histogram(bin=0..5)",
        1,
        30,
        "unknown histogram argument 'bin'; histogram takes bins=LO..HI, bins=[e0, e1, ...] "
        "or range=LO..HI, width=W",
    ),
    ('state("")', 1, 7, "empty stage name: expected a name inside the quotes"),
    (
        'state("a\\q")',
        1,
        7,
        'bad quoted name "a\\q": inside quotes use \\" for a quote and \\\\ for a backslash',
    ),
    ("", 1, 1, "empty query: expected METRIC(TARGET), e.g. occupancy(source -> server)"),
    (
        "state(a)\nstate(b)",
        2,
        1,
        "expected one query, found more from 'state' on: use parse_queries for several",
    ),
]


@pytest.mark.parametrize(("text", "line", "column", "message"), ERRORS)
def test_errors_say_where_what_was_found_and_what_was_expected(
    text: str, line: int, column: int, message: str
) -> None:
    with pytest.raises(QueryError) as info:
        parse_query(text)
    error = info.value
    assert (error.line, error.column, error.message) == (line, column, message)
    assert str(error).startswith(f"query:{line}:{column}: {message}")


def test_the_rendered_error_carries_a_caret_under_the_column() -> None:
    with pytest.raises(QueryError) as info:
        parse_query("occupancy(source => server)")
    assert str(info.value).splitlines()[1:] == [
        "  occupancy(source => server)",
        "                   ^",
    ]


def test_errors_in_a_file_report_the_line_of_the_query() -> None:
    text = "# header\n\nstate(a)   # fine\n  # comment\nocupancy(a -> b)\n"
    with pytest.raises(QueryError) as info:
        parse_queries(text, source="demo.queries")
    error = info.value
    assert (error.source, error.line, error.column) == ("demo.queries", 5, 1)
    assert str(error).splitlines() == [
        "demo.queries:5:1: " + error.message,
        "  ocupancy(a -> b)",
        "  ^",
    ]
    with pytest.raises(QueryError) as info:
        parse_queries("state(a)\nstate(b -> c\n")
    assert (info.value.line, info.value.column) == (2, 13)


def test_line_offset_shifts_the_reported_line_and_keeps_the_caret_right() -> None:
    with pytest.raises(QueryError) as info:
        parse_query("state(a): mean", source="cfg.toml", line_offset=6)
    assert (info.value.line, info.value.column) == (7, 11)
    assert str(info.value).splitlines()[1:] == ["  state(a): mean", "            ^"]


@pytest.mark.parametrize(
    "text",
    [
        "(",
        ")",
        "->",
        "occupancy(a -> b): mean every 1s extra",
        '"',
        "state(a) # ok\nx",
        "\x00",
        "ü",
    ],
)
def test_no_lark_exception_escapes(text: str) -> None:
    with pytest.raises(QueryError):
        parse_query(text)


def test_builders_make_the_same_queries_as_text() -> None:
    assert occupancy("source -> server").mean().histogram(bins=(0, 64)).every("1s") == parse_query(
        "occupancy(source -> server): mean, histogram(bins=0..64) every 1s"
    )
    assert state("server").duty() == parse_query("state(server): duty")
    assert throughput(("split", "walk*")).mean().max().every(500 * MS) == EXAMPLES[1][1]
    assert (
        latency(Edge("source", "server"))
        .mean()
        .p(50, 99)
        .histogram(range=("0", "10ms"), width="100us")
        == EXAMPLES[3][1]
    )
    assert interinsertion("source -> server").mean().quantiles(0.5, 0.9) == EXAMPLES[4][1]
    assert count("a -> b").sum().every("2s") == EXAMPLES[5][1]
    assert str(interdeparture("a -> b").min().count()) == "interdeparture(a -> b): min, count"
    assert str(latency("a -> b").histogram(bins=[0, "1us", 5_000])) == (
        "latency(a -> b): histogram(bins=[0, 1us, 5us])"
    )
    assert str(state("my stage")) == 'state("my stage")'


def test_builder_errors_are_query_errors() -> None:
    with pytest.raises(QueryError, match="expected '->', '~>' or '\\)' after 'source', found '='"):
        occupancy("source => server")
    with pytest.raises(QueryError, match="bad duration '5 parsecs': use a number with ns"):
        state("a").every("5 parsecs")
    with pytest.raises(QueryError, match="bad duration '0': must be greater than zero"):
        state("a").every(0)
    with pytest.raises(QueryError, match="takes plain numbers"):
        occupancy("a -> b").histogram(bins=["1ms", "2ms"])


def test_as_query_passes_queries_through_and_parses_text() -> None:
    query = state("a").duty()
    assert as_query(query) is query
    assert as_query("state(a): duty") == query


def test_origin_does_not_affect_equality_and_chaining_drops_it() -> None:
    parsed = parse_query("state(a)")
    assert parsed.origin is not None
    assert parsed == Query("state", StageRef("a"))
    assert parsed.duty().origin is None


def test_the_public_surface_is_pinned() -> None:
    import streamscope.query as query_package

    assert sorted(query_package.__all__) == sorted(
        [
            "METRICS",
            "Agg",
            "CompiledQuery",
            "Edge",
            "HistogramAgg",
            "MetricInfo",
            "Origin",
            "PercentileAgg",
            "Plan",
            "QuantilesAgg",
            "Query",
            "StageRef",
            "StatAgg",
            "Target",
            "TargetPlan",
            "as_query",
            "compile_queries",
            "count",
            "format_duration",
            "interdeparture",
            "interinsertion",
            "latency",
            "occupancy",
            "parse_duration",
            "parse_queries",
            "parse_query",
            "state",
            "throughput",
            "counter",
            "input_wait",
            "iteration",
            "output_wait",
            "sample",
            "timer",
        ]
    )
    assert all(hasattr(query_package, name) for name in query_package.__all__)


def test_the_parsers_tables_are_kept_and_read_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The parser's tables are made once and kept in the cache directory; a parser read back
    from them parses as the one made afresh."""
    from streamscope.query import parser

    monkeypatch.setattr(parser, "CACHE_DIR", tmp_path)
    parser._lark.cache_clear()
    try:
        made = parse_query("occupancy(a -> b): mean every 1s")
        kept = tmp_path / "query-grammar.lark"
        assert kept.is_file()
        parser._lark.cache_clear()
        assert parse_query("occupancy(a -> b): mean every 1s") == made
    finally:
        parser._lark.cache_clear()
