"""No queries asked: every channel's occupancy, throughput and latency, every stage's state."""

from __future__ import annotations

import pytest

import streamscope as ss
from streamscope.query.defaults import (
    CHANNEL_DEFAULTS,
    LOOP_LAG,
    PROGRAM_DEFAULTS,
    STAGE_DEFAULTS,
    default_queries,
    read_default,
)
from streamscope.query.parser import parse_query
from streamscope.runtime.session import prepare


def _pipeline() -> ss.Pipeline:
    p = ss.Pipeline("d")
    p.add("src", range(10))
    p.add("a", lambda x: x)
    p.add("b", lambda x: x)
    p.add("sink", lambda x: None)
    p.connect("src", "a")
    p.connect("src", "b")
    p.connect("a", "sink")
    p.connect("b", "sink")
    return p


def test_no_queries_measure_every_channel_and_every_stage() -> None:
    p = _pipeline()
    plan, _ = prepare(p, [], 1_000_000_000)
    by_metric = {q.metric: {t.name for t in q.targets} for q in plan.queries}
    channels = {c.name for c in p.topology().channels}
    assert by_metric == {
        "occupancy": channels, "throughput": channels, "latency": channels,
        "state": {"src", "a", "b", "sink"},
    }  # fmt: skip
    occupancy = next(q for q in plan.queries if q.metric == "occupancy")
    assert occupancy.text == "occupancy(* -> *)"  # its default aggregations: mean, max, histogram
    assert all(q.frame_ns == 1_000_000_000 for q in plan.queries)


def test_explicit_queries_replace_the_defaults() -> None:
    plan, _ = prepare(_pipeline(), ["state(a): duty"], 1_000_000_000)
    assert [q.text for q in plan.queries] == ["state(a): duty"]


def test_a_single_stage_gets_only_its_state() -> None:
    p = ss.Pipeline("one")
    p.add("only", range(3))
    assert default_queries(p.topology()) == ["state(*)"]


@pytest.mark.parametrize("text", [*CHANNEL_DEFAULTS, *STAGE_DEFAULTS, *PROGRAM_DEFAULTS, LOOP_LAG])
@pytest.mark.parametrize("source", ["query", "query 3"])
def test_a_default_is_read_without_the_parser_as_the_parser_reads_it(
    text: str, source: str
) -> None:
    read = read_default(text, source)
    parsed = parse_query(text, source=source)
    assert read == parsed and read is not None and read.origin == parsed.origin


def test_only_the_defaults_are_read_without_the_parser() -> None:
    assert read_default("occupancy(a -> b)", "query") is None
    assert read_default("state(*) every 1s", "query") is None
