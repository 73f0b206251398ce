"""Compiling queries against hand-built topologies: targets, wildcards, defaults, specs and taps."""

from __future__ import annotations

import dataclasses
import json

import pytest

from streamscope.aggregate.specs import Count, Duty, Histogram, Max, Mean, Min, Quantiles, Sum
from streamscope.core.errors import ConfigError, QueryError
from streamscope.core.topology import ChannelInfo, StageInfo, Topology
from streamscope.query import (
    Edge,
    Query,
    StatAgg,
    compile_queries,
    latency,
    occupancy,
    parse_queries,
    state,
)

S = 1_000_000_000


def _topology(stages: list[str], channels: list[tuple[str, str, int]]) -> Topology:
    return Topology(
        "test",
        stages=tuple(StageInfo(name, "main", "stage") for name in stages),
        channels=tuple(ChannelInfo(f"{a} -> {b}", a, b, cap) for a, b, cap in channels),
    )


LINE = _topology(["source", "server", "sink"], [("source", "server", 8), ("server", "sink", 4)])
FAN = _topology(
    ["split", "walk1", "walk2", "walker", "sink"],
    [
        ("split", "walk1", 16),
        ("split", "walk2", 32),
        ("split", "walker", 2),
        ("walk1", "sink", 4),
        ("walk2", "sink", 4),
    ],
)


def _one(text: str, topology: Topology = LINE) -> tuple[str, tuple[object, ...]]:
    (query,) = compile_queries([text], topology, S).queries
    (target,) = query.targets
    return target.name, target.specs


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        ("occupancy(source -> server)", (Mean(), Max(), Histogram.levels(0, 8))),
        ("throughput(source -> server)", (Mean(),)),
        ("count(source -> server)", (Sum(),)),
        ("interinsertion(source -> server)", (Mean(), Quantiles((0.5, 0.99)))),
        ("interdeparture(source -> server)", (Mean(), Quantiles((0.5, 0.99)))),
        ("latency(source -> server)", (Mean(), Quantiles((0.5, 0.99)))),
        ("state(server)", (Duty(("idle", "busy", "blocked_in", "blocked_out")),)),
    ],
)
def test_defaults_when_no_aggregations_are_written(text: str, specs: tuple[object, ...]) -> None:
    assert _one(text)[1] == specs


def test_written_aggregations_become_specs_in_order() -> None:
    _, specs = _one(
        "latency(source -> server): max, p50, count, quantiles(0.9, 0.1), p99.9, sum, min"
    )
    assert specs == (Max(), Quantiles((0.5, 0.9, 0.1, 0.999)), Count(), Sum(), Min())
    _, specs = _one("latency(source -> server): histogram(range=0..10ms, width=100us)")
    assert specs == (Histogram.from_range(0.0, 10e6, 100e3),)
    _, specs = _one("count(source -> server): histogram(bins=0..3), mean")
    assert specs == (Histogram((0.0, 1.0, 2.0, 3.0, 4.0)), Mean())
    _, specs = _one("throughput(source -> server): histogram(bins=[0, 10, 100])")
    assert specs == (Histogram((0.0, 10.0, 100.0)),)


def test_bare_occupancy_histogram_uses_the_largest_matched_capacity() -> None:
    (query,) = compile_queries(["occupancy(split -> walk*): histogram"], FAN, S).queries
    assert [t.name for t in query.targets] == [
        "split -> walk1",
        "split -> walk2",
        "split -> walker",
    ]
    assert {t.specs for t in query.targets} == {(Histogram.levels(0, 32),)}


def test_wildcards_match_every_channel_and_stage_they_fit() -> None:
    plan = compile_queries(
        ["throughput(* -> sink)", "state(walk?)", 'latency(split -> "walk[12]")', "state(*)"],
        FAN,
        S,
    )
    names = [[t.name for t in q.targets] for q in plan.queries]
    assert names == [
        ["walk1 -> sink", "walk2 -> sink"],
        ["walk1", "walk2"],
        ["split -> walk1", "split -> walk2"],
        ["split", "walk1", "walk2", "walker", "sink"],
    ]


@pytest.mark.parametrize(
    ("text", "taps"),
    [
        (
            "occupancy(source -> server)",
            {("tail", "source -> server"), ("head", "source -> server")},
        ),
        ("latency(source -> server)", {("tail", "source -> server"), ("head", "source -> server")}),
        ("throughput(source -> server)", {("head", "source -> server")}),
        ("interdeparture(source -> server)", {("head", "source -> server")}),
        ("count(source -> server)", {("tail", "source -> server")}),
        ("interinsertion(source -> server)", {("tail", "source -> server")}),
        ("state(server)", {("state", "server")}),
    ],
)
def test_each_metric_asks_for_its_taps(text: str, taps: set[tuple[str, str]]) -> None:
    assert compile_queries([text], LINE, S).taps == frozenset(taps)


def test_taps_of_several_queries_are_united() -> None:
    plan = compile_queries(["count(* -> sink)", "throughput(walk1 -> sink)", "state(sink)"], FAN, S)
    assert plan.taps == {
        ("tail", "walk1 -> sink"),
        ("tail", "walk2 -> sink"),
        ("head", "walk1 -> sink"),
        ("state", "sink"),
    }


def test_ids_texts_units_and_frames() -> None:
    plan = compile_queries(
        [
            "occupancy(source->server) every 250ms",
            occupancy("server -> sink").mean(),
            "state( server ):duty",
        ],
        LINE,
        2 * S,
    )
    assert [(q.id, q.text, q.unit, q.frame_ns) for q in plan.queries] == [
        (0, "occupancy(source -> server) every 250ms", "items", S // 4),
        (1, "occupancy(server -> sink): mean", "items", 2 * S),
        (2, "state(server): duty", "state", 2 * S),
    ]
    units = compile_queries(
        ["throughput(a -> b)", "latency(a -> b)", "count(a -> b)"],
        _topology(["a", "b"], [("a", "b", 1)]),
        S,
    )
    assert [q.unit for q in units.queries] == ["items/s", "ns", "items"]


def test_to_dict_is_json_and_names_the_stats() -> None:
    (query,) = compile_queries(["latency(source -> server): mean, p99"], LINE, S).queries
    stored = json.loads(json.dumps(query.to_dict()))
    assert stored == {
        "id": 0,
        "text": "latency(source -> server): mean, p99",
        "metric": "latency",
        "unit": "ns",
        "frame_ns": S,
        "targets": [
            {
                "name": "source -> server",
                "stats": ["mean", "quantiles"],
                "specs": [{"stat": "mean"}, {"stat": "quantiles", "qs": [0.99]}],
            }
        ],
    }


def _error(queries: list[Query | str] | str, topology: Topology = LINE) -> QueryError:
    with pytest.raises(QueryError) as info:
        compile_queries(queries, topology, S)
    return info.value


def test_unknown_stage_points_at_its_name() -> None:
    error = _error(["state(sink)", "occupancy(source -> servr)"])
    assert error.message == (
        "unknown stage 'servr'; known stages: source, server, sink; did you mean 'server'?"
    )
    assert (error.source, error.line, error.column) == ("query 2", 1, 21)
    error = _error(["state(nothing)"])
    assert error.message == "unknown stage 'nothing'; known stages: source, server, sink"
    assert error.column == 7


def test_a_glob_that_matches_no_stage() -> None:
    error = _error(["latency(wlk* -> sink)"], FAN)
    assert (
        error.message == "no stage matches 'wlk*'; known stages: split, walk1, walk2, walker, sink"
    )
    assert error.column == 9


def test_stages_without_a_channel_between_them() -> None:
    error = _error(["occupancy(source -> sink)"])
    assert error.message == (
        "no channel from 'source' to 'sink'; channels: source -> server, server -> sink"
    )
    assert error.column == 11
    lonely = _topology(["a", "b"], [])
    assert (
        _error(["count(a -> b)"], lonely).message == "no channel from 'a' to 'b'; channels: (none)"
    )


def test_errors_in_a_queries_file_point_at_its_line() -> None:
    queries = parse_queries("# demo\nstate(sink)\n\noccupancy(source -> servr)\n", source="demo.q")
    error = _error(list(queries))
    assert (error.source, error.line, error.column) == ("demo.q", 4, 21)
    assert str(error).splitlines()[1:] == [
        "  occupancy(source -> servr)",
        "                      ^",
    ]
    error = _error("state(sink)\nstate(nope)\n")
    assert (error.source, error.line, error.column) == ("queries", 2, 7)


def test_hand_built_queries_are_checked_like_text() -> None:
    error = _error([Query("occupancy", Edge("source", "server"), (StatAgg("duty"),))])
    assert error.message == "'duty' only applies to state queries"
    assert (error.source, error.column) == ("query 1", 30)
    error = _error([state("server").duty(), Query("ocupancy", Edge("a", "b"))])
    assert error.message.startswith("unknown metric 'ocupancy'")
    assert error.source == "query 2"


def test_a_stale_origin_is_not_used() -> None:
    (parsed,) = parse_queries("\n\nlatency(source -> server)", source="f")
    moved = dataclasses.replace(parsed, target=Edge("source", "servr"))
    error = _error([moved])
    assert (error.source, error.line, error.column) == ("query 1", 1, 19)


def test_nothing_is_returned_when_any_query_is_bad() -> None:
    good = [latency("source -> server").mean(), "state(server)"]
    assert len(compile_queries(good, LINE, S).queries) == 2
    with pytest.raises(QueryError):
        compile_queries([*good, "state(server): mean"], LINE, S)


def test_default_frame_must_be_positive() -> None:
    with pytest.raises(ConfigError, match="default frame must be greater than zero"):
        compile_queries(["state(server)"], LINE, 0)


def test_channels_without_capacity_get_doubling_bins_by_default() -> None:
    """By default a queue with no fixed capacity gets bins for 0 and 1, then twice as wide
    each, so how often it was empty is known (the bottleneck test asks); a bare histogram
    written in a query still needs its bins."""
    unbounded = _topology(["a", "b"], [("a", "b", 0)])
    (mean, most, hist) = _one("occupancy(a -> b)", unbounded)[1]
    assert (mean, most) == (Mean(), Max())
    assert isinstance(hist, Histogram) and hist == Histogram.doubling()
    assert hist.edges[:5] == (0.0, 1.0, 2.0, 4.0, 8.0) and hist.edges[-1] == float(1 << 20)
    error = _error(["occupancy(a -> b): histogram"], unbounded)
    assert error.message == (
        "a -> b has no fixed capacity, so a bare histogram has no levels: "
        "give histogram(bins=LO..HI)"
    )


def test_stages_named_only_by_channels_still_resolve() -> None:
    bare = Topology("t", channels=(ChannelInfo("x -> y", "x", "y", 3),))
    assert _one("occupancy(x -> y)", bare)[0] == "x -> y"


def test_first_last_and_box_for_the_seed_latency_measurements() -> None:
    """Lancaster & Chamberlain 2010 measures the first and the last datum's latency and draws box-whisker plots."""
    from streamscope.aggregate.specs import First, Last, Quantiles
    from streamscope.core.topology import ChannelInfo, StageInfo, Topology

    topo = Topology(
        "t",
        stages=(StageInfo("a", "main", "source"), StageInfo("b", "main", "sink")),
        channels=(ChannelInfo("a -> b", "a", "b", 4),),
    )
    plan = compile_queries(["latency(a -> b): first, last, box, p50 every 1s"], topo, 10**9)
    specs = plan.queries[0].targets[0].specs
    assert specs[:2] == (First(), Last())
    assert specs[2] == Quantiles((0.0, 0.25, 0.5, 0.75, 1.0))  # box, with p50 merged in once
    assert str(plan.queries[0].query) == "latency(a -> b): first, last, box, p50 every 1s"


def test_a_compiled_plan_crosses_to_the_monitor_whole() -> None:
    """The monitor process receives the plan compiled once (``Plan.dumps``), not the query
    texts to compile again: read back, it is the same plan — every query, spec, tap and site,
    each query's origin too (open-world targets found later are compiled from it)."""
    texts = [
        "occupancy(split -> walk*): histogram, mean every 500ms",
        "latency(* -> sink): p50, p99.9, quantiles(0.1, 0.25), max",
        "throughput(walk1 -> sink): histogram(bins=[1, 2.5, 10])",
        "state(walk*): duty every 2s",
        "count(split -> walker): sum, first, last",
    ]
    plan = compile_queries(texts, FAN, S, open_world=True).sited(FAN, trace=False)
    back = type(plan).loads(plan.dumps())
    assert back == plan and back.sites == plan.sites and back.open_world
    assert [q.query.origin for q in back.queries] == [q.query.origin for q in plan.queries]
    assert back.dumps() == plan.dumps()
    # where each pair is reduced was decided once, and reads the same on the other side
    assert {(q.id, t.name) for q, t in back.monitor_measured} == {
        (q.id, t.name) for q in plan.queries for t in q.targets
    }
    assert back.estimated == [] and back.host_reduced == {}
    with pytest.raises(ValueError, match="sited"):
        _ = compile_queries(texts, FAN, S).monitor_measured


def test_a_large_queues_bare_histogram_has_doubling_bins_with_empty_and_full_their_own() -> None:
    from streamscope.aggregate.points import HistogramPoint
    from streamscope.analysis.levels import level_fractions
    from streamscope.query.aggspecs import LEVEL_BINS

    big = Histogram.doubling_to(1024)
    assert big.edges == (0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0,
                         1024.0, 1025.0)  # fmt: skip
    assert Histogram.doubling_to(1000).edges[-3:] == (512.0, 1000.0, 1001.0)
    # empty and full are still told apart from the rest
    w = tuple(float(i + 1) for i in range(len(big.edges) - 1))
    assert level_fractions(HistogramPoint(big.edges, w), 1024) == (1.0, w[-1])
    assert LEVEL_BINS == 256
    wide = _topology(["a", "b"], [("a", "b", 1024)])
    assert _one("occupancy(a -> b): histogram", wide)[1] == (big,)
    assert _one("occupancy(a -> b): histogram(bins=0..1024)", wide)[1] == (
        Histogram.levels(0, 1024),
    )
    edge = _topology(["a", "b"], [("a", "b", LEVEL_BINS)])
    assert _one("occupancy(a -> b): histogram", edge)[1] == (Histogram.levels(0, LEVEL_BINS),)
