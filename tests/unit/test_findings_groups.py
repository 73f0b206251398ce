"""Findings about groups of parallel replicas, on synthetic runs built in an InMemoryStore."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from streamscope.aggregate.points import DutyPoint, FrameResult, HistogramPoint, Point, ScalarPoint
from streamscope.analysis import Finding, findings
from streamscope.analysis.groups import range_label, stage_groups
from streamscope.core.topology import ChannelInfo, ResourceInfo, StageInfo, Topology
from streamscope.store.reader import Run
from streamscope.store.writer import InMemoryStore, QueryRecord, RunMeta

F = 100_000_000
LABELS = ("idle", "busy", "blocked_in", "blocked_out")
DASH = "\u2013"


def topology(stages: Sequence[str], channels: Sequence[tuple[str, str]]) -> Topology:
    srcs = {s for s, _ in channels}
    dsts = {d for _, d in channels}

    def role(s: str) -> str:
        return "source" if s not in dsts else "sink" if s not in srcs else "stage"

    return Topology(
        "t",
        (ResourceInfo("main", "thread"),),
        tuple(StageInfo(s, "main", role(s)) for s in stages),
        tuple(ChannelInfo(f"{s} -> {d}", s, d, 4) for s, d in channels),
    )


def fan(stem: str, n: int, before: str = "split", after: str = "avg") -> list[tuple[str, str]]:
    return [(before, f"{stem}{i}") for i in range(n)] + [(f"{stem}{i}", after) for i in range(n)]


def duty(busy: float) -> DutyPoint:
    return DutyPoint(LABELS, (1 - busy, busy, 0.0, 0.0))


def occ(full: float, empty: float) -> list[Point]:
    """An occupancy frame of a capacity-4 channel: ``full``/``empty`` of the time at 4/0."""
    rest = 1 - full - empty
    weights = (empty * F, rest * F, 0.0, 0.0, full * F)
    return [ScalarPoint("mean", 4 * full + rest), HistogramPoint((0.0, 1, 2, 3, 4, 5), weights)]


def make_run(
    topo: Topology, states: dict[str, float], fills: dict[str, tuple[float, float]]
) -> Run:
    """Two frames of ``state(STAGE): duty`` per stage in ``states`` (its busy fraction) and of
    ``occupancy(CHANNEL): mean, histogram`` per channel in ``fills`` (full, empty)."""
    queries: list[QueryRecord] = []
    results: list[FrameResult] = []

    def add(text: str, metric: str, unit: str, target: str, points: list[Point]) -> None:
        qid = len(queries)
        queries.append(QueryRecord(qid, text, metric, unit, F, (target,), ("duty",)))
        results.extend(
            FrameResult(qid, target, k, k * F, (k + 1) * F, F, tuple(points)) for k in range(2)
        )

    for stage, busy in states.items():
        add(f"state({stage}): duty", "state", "state", stage, [duty(busy)])
    for ch, (full, empty) in fills.items():
        add(f"occupancy({ch}): mean, histogram", "occupancy", "items", ch, occ(full, empty))
    return _stored(topo, queries, results)


def _stored(topo: Topology, queries: list[QueryRecord], results: list[FrameResult]) -> Run:
    """A completed run of two frames of ``topo``, held in memory."""
    store = InMemoryStore()
    store.begin(RunMeta("id", "t", "", "", (), "h", 0, F, "0"), topo, queries)
    store.write_frames(results)
    store.write_drops([])
    store.finish("completed", None, 1, 2 * F)
    return Run.from_memory(store)


def the_bottleneck(run: Run) -> Finding:
    found = [f for f in findings(run) if f.kind == "bottleneck"]
    assert len(found) == 1, [f.title for f in findings(run)]
    return found[0]


# --- grouping -------------------------------------------------------------------------------


def test_replicas_with_the_same_neighbours_form_one_group_named_by_range() -> None:
    walks = [f"walk{i}" for i in (3, 0, 7, 1, 2, 6, 4, 5)]  # any order in the topology
    topo = topology(["prng", "split", *walks, "avg"], [("prng", "split"), *fan("walk", 8)])
    groups = stage_groups(topo)
    assert [g.label for g in groups] == ["prng", "split", f"walk0{DASH}walk7", "avg"]
    walk = groups[2]
    assert walk.members == tuple(f"walk{i}" for i in range(8)) and walk.replicas
    assert walk.stem == "walk" and walk.pattern == "walk*" and walk.aliases == ()
    assert walk.ins == tuple(f"split -> walk{i}" for i in range(8))
    assert walk.outs == tuple(f"walk{i} -> avg" for i in range(8))
    assert not groups[0].replicas and groups[0].pattern == "prng"


def test_numbered_names_alone_or_shared_neighbours_alone_are_not_replicas() -> None:
    chain = topology(["step1", "step2", "step3"], [("step1", "step2"), ("step2", "step3")])
    assert [g.label for g in stage_groups(chain)] == ["step1", "step2", "step3"]
    av = topology(
        ["decode", "audio", "video", "mux"],
        [("decode", "audio"), ("decode", "video"), ("audio", "mux"), ("video", "mux")],
    )
    assert [g.label for g in stage_groups(av)] == ["decode", "audio", "video", "mux"]
    # Same stem, different places: w0 and w1 fed by split, w2 fed by w1.
    mixed = topology(
        ["split", "w0", "w1", "w2", "avg"],
        [("split", "w0"), ("split", "w1"), ("w1", "w2"), ("w0", "avg"), ("w2", "avg")],
    )
    assert [g.label for g in stage_groups(mixed)] == ["split", "w0", "w1", "w2", "avg"]


def test_parallel_lanes_group_level_by_level() -> None:
    lanes = [("split", "a0"), ("split", "a1"), ("a0", "b0"), ("a1", "b1"), ("b0", "m"), ("b1", "m")]
    topo = topology(["split", "a0", "a1", "b0", "b1", "m"], lanes)
    assert [g.label for g in stage_groups(topo)] == ["split", f"a0{DASH}a1", f"b0{DASH}b1", "m"]


def test_queues_that_name_the_group_connect_it() -> None:
    """A hand-instrumented program: queues reader -> parser -> writer, workers parser0..3."""
    stages = ["reader", "parser2", "parser0", "parser1", "parser3", "writer"]
    topo = topology(stages, [("reader", "parser"), ("parser", "writer")])
    groups = stage_groups(topo)
    assert [g.label for g in groups] == ["reader", f"parser0{DASH}parser3", "writer"]
    parser = groups[1]
    assert parser.aliases == ("parser",)
    assert parser.ins == ("reader -> parser",) and parser.outs == ("parser -> writer",)
    # The group's name may be a stage of its own that measured nothing: still an alias ...
    with_alias = topology(
        ["reader", "parser", *stages[1:]], [("reader", "parser"), ("parser", "writer")]
    )
    assert [g.label for g in stage_groups(with_alias)] == [g.label for g in groups]
    # ... but a stage with states of its own is a stage, not a name for the workers.
    own = stage_groups(with_alias, observed=["parser"])
    assert [g.label for g in own] == ["reader", "parser", f"parser0{DASH}parser3", "writer"]
    assert own[2].aliases == () and own[2].ins == ()
    # One worker alone is a single stage, still connected through the queues' name.
    (one,) = [g for g in stage_groups(topology(["r", "parser_0"], [("r", "parser")])) if g.aliases]
    assert one.label == "parser_0" and not one.replicas and one.ins == ("r -> parser",)


def test_range_labels() -> None:
    assert range_label([f"walk{i}" for i in range(8)]) == f"walk0{DASH}walk7"
    assert range_label(["w1", "w2", "w3", "w5"]) == f"w1{DASH}w3, w5"
    assert range_label(["w01", "w02"]) == f"w01{DASH}w02"
    assert range_label(["only3"]) == "only3"
    assert range_label(["a", "b"]) == "a, b"


# --- findings on groups ---------------------------------------------------------------------

WALKS = [f"walk{i}" for i in range(8)]
LAPLACE = topology(["prng", "split", *WALKS, "avg"], [("prng", "split"), *fan("walk", 8)])


def test_busy_replicas_are_rate_limiting_together() -> None:
    busy = dict(zip(WALKS, [0.95, 0.96, 0.97, 0.98, 0.96, 0.97, 0.95, 0.98], strict=True))
    run = make_run(LAPLACE, {"prng": 0.02, "split": 0.01, **busy, "avg": 0.02}, {})
    top = the_bottleneck(run)
    label = f"walk0{DASH}walk7"
    assert (top.target, top.severity) == (label, "problem")
    assert top.title == f"{label} are rate-limiting together (busy 97 % on average)"
    assert top.suggestion.startswith("add replicas (more walk stages)")
    assert "larger buffer will not help" in top.suggestion
    assert "8 parallel replicas of one stage (fed by split, feeding avg)" in top.detail
    assert "busy 97 % of the time on average (95 % to 98 % each)" in top.detail
    assert top.evidence["members"] == WALKS and top.evidence["replicas"] == 8
    assert top.evidence["busy"] == pytest.approx(sum(busy.values()) / 8, abs=1e-4)
    assert top.evidence["busy_by_member"]["walk3"] == pytest.approx(0.98)
    assert top.evidence["busy_frames"] == [[0, 1]] and top.evidence["producers"] == ["split"]
    assert "other_candidates" not in top.evidence  # no single walk singled out beside it
    assert not any(f.target in WALKS for f in findings(run))  # no single walk singled out
    json.dumps(top.to_dict(), allow_nan=False)


def test_one_slow_replica_is_named_alone_as_the_straggler() -> None:
    busy = dict.fromkeys(WALKS, 0.3) | {"walk2": 0.97}
    top = the_bottleneck(make_run(LAPLACE, busy, {}))
    assert top.target == "walk2" and top.title == "stage walk2 is rate-limiting"
    assert top.evidence["replicas_of"] == f"walk0{DASH}walk7"
    assert top.evidence["replicas_busy"] == pytest.approx((7 * 0.3 + 0.97) / 8, abs=1e-4)
    assert "one of 8 replicas" in top.detail and "slower than the other replicas" in top.suggestion


def test_a_group_judged_on_its_channels_when_no_states_were_recorded() -> None:
    fills = {f"split -> walk{i}": (0.9, 0.0) for i in range(8)}
    fills |= {f"walk{i} -> avg": (0.0, 0.8 + 0.02 * i) for i in range(8)}
    top = the_bottleneck(make_run(LAPLACE, {}, fills))
    assert top.target == f"walk0{DASH}walk7"
    assert "the 8 channels into them are full 90 % on average" in top.detail
    assert top.evidence["output_empty_fraction"] == pytest.approx(0.87)
    assert set(top.evidence["input_channels"]) == {f"split -> walk{i}" for i in range(8)}
    assert "state(walk*) was not queried" in top.detail


def test_hand_instrumented_workers_are_judged_through_their_queues() -> None:
    parsers = [f"parser{i}" for i in range(4)]
    topo = topology(["reader", *parsers, "writer"], [("reader", "parser"), ("parser", "writer")])
    states = {"reader": 0.01, **dict.fromkeys(parsers, 0.99), "writer": 0.01}
    fills = {"reader -> parser": (0.97, 0.0), "parser -> writer": (0.0, 0.99)}
    top = the_bottleneck(make_run(topo, states, fills))
    assert top.target == f"parser0{DASH}parser3" and top.severity == "problem"
    assert top.evidence["aliases"] == ["parser"]
    assert top.evidence["input_channel"] == "reader -> parser"
    assert "the channel into them (reader -> parser) is full 97 %" in top.detail
    assert "the channel out of them (parser -> writer) empty 99 %" in top.detail
    assert top.suggestion.startswith("add replicas (more parser stages)")


def test_a_single_stage_is_still_judged_alone_and_keeps_its_name_case() -> None:
    topo = topology(["src", "Work1", "sink"], [("src", "Work1"), ("Work1", "sink")])
    top = the_bottleneck(make_run(topo, {"src": 0.1, "Work1": 0.95, "sink": 0.1}, {}))
    assert top.title == "stage Work1 is rate-limiting" and "members" not in top.evidence
    assert top.detail.startswith("Work1 is busy 95 %")
    assert top.suggestion.startswith("give Work1 more parallelism")


def test_no_bottleneck_names_the_busiest_group_on_average() -> None:
    run = make_run(LAPLACE, {"prng": 0.1, "split": 0.05, **dict.fromkeys(WALKS, 0.5)}, {})
    (nb,) = [f for f in findings(run) if f.kind == "no_bottleneck"]
    assert f"the busiest, walk0{DASH}walk7, 50 % on average" in nb.detail
    assert nb.evidence["groups"] == {f"walk0{DASH}walk7": WALKS}


def test_missing_state_queries_suggest_a_pattern_for_a_group() -> None:
    run = make_run(LAPLACE, {}, {"prng -> split": (0.1, 0.5)})
    (missing,) = [f for f in findings(run) if f.kind == "missing_queries"]
    assert "(split, walk*, avg)" in missing.suggestion


def test_a_group_with_members_not_measured_says_which() -> None:
    run = make_run(LAPLACE, dict.fromkeys(WALKS[:7], 0.9), {})
    top = the_bottleneck(run)
    assert top.target == f"walk0{DASH}walk7" and top.evidence["busy"] == pytest.approx(0.9)
    assert "Not confirmed: state(walk7) was not queried." in top.detail
    assert "walk7" in top.evidence["stages_without_state"]


def test_replicated_sources_that_set_the_pace_are_named_together() -> None:
    topo = topology(
        ["src0", "src1", "work", "sink"], [("src0", "work"), ("src1", "work"), ("work", "sink")]
    )
    run = make_run(topo, {"src0": 0.95, "src1": 0.97, "work": 0.3, "sink": 0.1}, {})
    (nb,) = [f for f in findings(run) if f.kind == "no_bottleneck"]
    assert f"The sources src0{DASH}src1 are busy 96 % on average" in nb.detail
    assert nb.suggestion.startswith(f"to go faster, feed src0{DASH}src1 faster")


def test_a_replica_only_a_little_busier_than_the_rest_is_no_straggler() -> None:
    """The group's own spread (one walk at 0.82 among walks at 0.75) names no one alone."""
    busy = dict.fromkeys(WALKS, 0.75) | {"walk2": 0.82}
    found = findings(make_run(LAPLACE, busy, {}))
    assert not any(f.target == "walk2" for f in found), [f.title for f in found]


def _states_run(topo: Topology, shares: dict[str, tuple[float, ...]]) -> Run:
    """A run of two frames of ``topo`` whose stages spent them in the states ``shares`` gives
    (idle, busy, blocked in, blocked out), each stage's by a ``state`` query of its own."""
    queries = [QueryRecord(i, f"state({s}): duty", "state", "state", F, (s,), ("duty",))
               for i, s in enumerate(shares)]  # fmt: skip
    results = [FrameResult(q.id, q.targets[0], k, k * F, (k + 1) * F, F,
                           (DutyPoint(LABELS, shares[q.targets[0]]),))
               for q in queries for k in range(2)]  # fmt: skip
    return _stored(topo, queries, results)


def test_a_hand_over_whose_producer_waits_on_it_is_full_that_share() -> None:
    """A streamz hand-over (a channel of no capacity: its fill says nothing of its being full)
    whose one producer waited to hand items over 99 % of the time: the stage it hands them to
    limits the rate, though a busy machine kept that stage from its items 25 % of its time
    (its loop's thread brings them). Without the producer's wait, nothing was named."""
    topo = Topology(
        "t", (ResourceInfo("main", "thread"),),
        (StageInfo("main", "main", "source"), StageInfo("slow", "main", "stage"),
         StageInfo("even", "main", "sink")),
        (ChannelInfo("main -> slow", "main", "slow", 0), ChannelInfo("slow -> even", "slow", "even", 0)),
    )  # fmt: skip
    shares = {"main": (0.0, 0.01, 0.0, 0.99), "slow": (0.0, 0.75, 0.25, 0.0),
              "even": (0.0, 0.01, 0.99, 0.0)}  # fmt: skip
    top = the_bottleneck(_states_run(topo, shares))
    assert top.target == "slow" and top.evidence["input_full_fraction"] == 0.99, top.evidence


def test_a_hand_over_whose_consumer_hands_over_to_a_busier_stage_is_not_full() -> None:
    """streamz's ``map_async`` hands its results on to a ``map`` by calling it: the emitting
    main thread waits 99 % of its time, but on the ``map`` that computes 96 % of its, not on
    the fetching stage half busy in between (its tasks wait for the loop that the ``map``
    holds). The fetching stage was named rate-limiting once in six runs beside a busy core,
    whenever its busy share came out just past a half."""
    topo = Topology(
        "t", (ResourceInfo("main", "asyncio"),),
        (StageInfo("main", "main", "source"), StageInfo("fetch", "main", "stage"),
         StageInfo("parse", "main", "stage"), StageInfo("keep", "main", "sink")),
        (ChannelInfo("main -> fetch", "main", "fetch", 0),
         ChannelInfo("fetch -> parse", "fetch", "parse", 0),
         ChannelInfo("parse -> keep", "parse", "keep", 0)),
    )  # fmt: skip
    shares = {"main": (0.0, 0.01, 0.0, 0.99), "fetch": (0.47, 0.53, 0.0, 0.0),
              "parse": (0.0, 0.96, 0.04, 0.0), "keep": (0.0, 0.01, 0.99, 0.0)}  # fmt: skip
    top = the_bottleneck(_states_run(topo, shares))
    assert top.target == "parse", (top.target, top.evidence)


def test_a_stack_samplers_lost_samples_are_named_as_its_samples_not_its_file() -> None:
    """A process's stack sampler's probe targets its stack table's file (in the run's ring
    directory, gone after the run): its lost records are said of its samples."""
    from streamscope.aggregate.points import DropCount
    from streamscope.analysis.health import STACK_SAMPLES
    from streamscope.core.topology import ProbeInfo

    base = topology(["a", "b"], [("a", "b")])
    table = "/dev/shm/streamscope-1-x/rings/stacks-9.tsv"
    topo = Topology(base.name, base.resources, base.stages, base.channels,
                    (ProbeInfo(9, "stacks", table), ProbeInfo(10, "tail", "a -> b")))  # fmt: skip
    store = InMemoryStore()
    store.begin(RunMeta("id", "t", "", "", (), "h", 0, F, "0"), topo, [])
    store.write_frames([])
    store.write_drops([DropCount(9, 0, 5, 20), DropCount(10, 1, 3, 30)])
    store.finish("completed", None, 1, 2 * F)
    lost = {f.target: f for f in findings(Run.from_memory(store)) if f.kind == "drops"}
    assert set(lost) == {STACK_SAMPLES, "a -> b"}
    assert table not in lost[STACK_SAMPLES].title and lost[STACK_SAMPLES].evidence["dropped"] == 5
