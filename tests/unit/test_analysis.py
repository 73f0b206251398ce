"""streamscope.analysis on synthetic runs built in an InMemoryStore: exact numbers, edge cases."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from oracles import THREE_STAGES
from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    Point,
    ScalarPoint,
)
from streamscope.analysis import (
    channel_summary,
    compare,
    findings,
    stage_breakdown,
)
from streamscope.analysis.delta import direction
from streamscope.analysis.evidence import frame_ranges
from streamscope.analysis.levels import level_fractions
from streamscope.analysis.series import whole_run
from streamscope.store.reader import Run
from streamscope.store.writer import InMemoryStore, QueryRecord, RunMeta

F = 100_000_000
LABELS = ("idle", "busy", "blocked_in", "blocked_out")
TOPO = THREE_STAGES


def duty(*fr: float) -> DutyPoint:
    return DutyPoint(LABELS, tuple(fr))


def occ_hist(levels: dict[int, float], capacity: int = 4) -> HistogramPoint:
    """A bare occupancy histogram (one bin per level 0..capacity), weights in ns."""
    return HistogramPoint(
        tuple(float(i) for i in range(capacity + 2)),
        tuple(levels.get(i, 0.0) for i in range(capacity + 1)),
    )


def make_run(
    queries: Sequence[tuple[str, str, str, tuple[str, ...]]],
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]],
    *,
    status: str = "completed",
    duration_ns: int = 2 * F,
    drops: Sequence[DropCount] = (),
    name: str = "t",
) -> Run:
    """queries: (text, metric, unit, stats) with ids 0..; frames: (qid, target) → (covered, points)."""
    store = InMemoryStore()
    qs = [
        QueryRecord(i, text, metric, unit, F, (text.split("(")[1].split(")")[0],), stats)
        for i, (text, metric, unit, stats) in enumerate(queries)
    ]
    store.begin(RunMeta("id", name, "", "", (), "h", 0, F, "0"), TOPO, qs)
    results = [
        FrameResult(qid, target, k, k * F, (k + 1) * F, covered, tuple(points))
        for (qid, target), rows in frames.items()
        for k, (covered, points) in enumerate(rows)
    ]
    store.write_frames(results)
    store.write_drops(list(drops))
    store.finish(status, "boom" if status == "failed" else None, 1, duration_ns)
    return Run.from_memory(store)


STATE = [
    ("state(src): duty", "state", "state", ("duty",)),
    ("state(work): duty", "state", "state", ("duty",)),
    ("state(sink): duty", "state", "state", ("duty",)),
]
OCC = [
    ("occupancy(src -> work): mean, max, histogram", "occupancy", "items", ("mean", "max", "histogram")),
    ("occupancy(work -> sink): mean, max, histogram", "occupancy", "items", ("mean", "max", "histogram")),
]  # fmt: skip


def bottleneck_run(work_busy: float = 0.95) -> Run:
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
        (0, "src"): [(F, [duty(0, 0.02, 0, 0.98)])] * 2,
        (1, "work"): [(F, [duty(1 - work_busy, work_busy, 0, 0)])] * 2,
        (2, "sink"): [(F, [duty(0, 0.05, 0.95, 0)])] * 2,
        (3, "src -> work"): [
            (F, [ScalarPoint("mean", 3.9), ScalarPoint("max", 4.0), occ_hist({3: 0.1 * F, 4: 0.9 * F})])
        ]
        * 2,
        (4, "work -> sink"): [
            (F, [ScalarPoint("mean", 0.1), ScalarPoint("max", 1.0), occ_hist({0: 0.9 * F, 1: 0.1 * F})])
        ]
        * 2,
    }  # fmt: skip
    return make_run([*STATE, *OCC], frames)


def test_whole_run_reductions() -> None:
    import numpy as np

    v = np.array([1.0, np.nan, 3.0])
    w = np.array([1.0, 5.0, 3.0])
    assert whole_run(v, w, "mean") == pytest.approx((1 + 9) / 4)
    assert whole_run(v, w, "max") == 3.0
    assert whole_run(v, w, "min") == 1.0
    assert whole_run(v, w, "count") == 4.0
    assert whole_run(np.array([np.nan]), np.array([1.0]), "mean") is None


def test_level_fractions_need_bins_that_single_out_the_level() -> None:
    h = occ_hist({0: 2.0, 2: 1.0, 4: 5.0})
    assert level_fractions(h, 4) == (2.0, 5.0)
    coarse = HistogramPoint((0.0, 2.0, 5.0), (3.0, 5.0))  # [0, 2) holds 0 and 1; [2, 5) holds 4
    empty, full = level_fractions(coarse, 4)
    assert empty != empty and full != full  # NaN: cannot tell
    # A queue with no fixed capacity (0): its doubling bins single out level 0; never full.
    doubling = HistogramPoint((0.0, 1.0, 2.0, 4.0), (3.0, 1.0, 6.0), over=2.0)
    assert level_fractions(doubling, 0) == (3.0, None)


def test_stage_breakdown_is_weighted_by_covered_time() -> None:
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
        (1, "work"): [(F // 4, [duty(0, 1, 0, 0)]), (F * 3 // 4, [duty(0, 0, 1, 0)])],
    }
    run = make_run(STATE, frames)
    by = {b.stage: b for b in stage_breakdown(run)}
    assert list(by) == ["src", "work", "sink"]
    w = by["work"]
    assert w.busy == pytest.approx(0.25) and w.blocked_in == pytest.approx(0.75)
    assert w.computation == w.busy and w.communication == pytest.approx(0.75)
    assert w.other == 0 and w.frames == (0, 1)
    assert by["src"].busy is None and by["src"].communication is None


def test_a_stage_s_breakdown_is_over_its_working_life() -> None:
    """Wholly idle frames before a stage's first working one (a device still starting) and
    after its last (it finished) are left out; idle inside it, and a worker's idle beside
    another's work in a frame, stay in."""
    rows = [duty(1, 0, 0, 0), duty(1, 0, 0, 0), duty(0.4, 0.6, 0, 0), duty(0, 1, 0, 0),
            duty(1, 0, 0, 0), duty(0, 0.9, 0.1, 0), duty(1, 0, 0, 0)]  # fmt: skip
    run = make_run(STATE, {(1, "work"): [(F, [d]) for d in rows]})
    w = {b.stage: b for b in stage_breakdown(run)}["work"]
    assert w.frames == (2, 3, 4, 5)
    assert w.busy == pytest.approx((0.6 + 1 + 0 + 0.9) / 4)
    assert w.idle == pytest.approx((0.4 + 1) / 4)
    never = make_run(STATE, {(1, "work"): [(F, [duty(1, 0, 0, 0)])] * 3})
    assert {b.stage: b for b in stage_breakdown(never)}["work"].busy == 0.0  # idle all along


def test_a_stage_s_working_life_begins_with_its_first_item() -> None:
    """Frames a worker spent waiting for its first item (a loader process still starting on
    a loaded machine: the worker's own start a sliver of busy) are left out; a wait between
    items, and one after its last for more, stay in. A stage that never works 1 % of a frame
    (a sink of microsecond items) is taken over its frames that are not wholly idle."""
    rows = [duty(0, 0.001, 0.999, 0), duty(0, 0, 1, 0), duty(0, 0.8, 0.2, 0), duty(0, 1, 0, 0),
            duty(0, 0, 1, 0), duty(0, 0.9, 0.1, 0), duty(0, 0, 1, 0), duty(1, 0, 0, 0)]  # fmt: skip
    run = make_run(STATE, {(1, "work"): [(F, [d]) for d in rows]})
    w = {b.stage: b for b in stage_breakdown(run)}["work"]
    assert w.frames == (2, 3, 4, 5, 6)
    assert w.busy == pytest.approx((0.8 + 1 + 0 + 0.9 + 0) / 5)
    sink = [duty(1, 0, 0, 0), duty(0, 0.002, 0.998, 0), duty(0, 0.003, 0.997, 0), duty(1, 0, 0, 0)]
    run = make_run(STATE, {(1, "work"): [(F, [d]) for d in sink]})
    assert {b.stage: b for b in stage_breakdown(run)}["work"].frames == (1, 2)


def test_a_consumer_s_working_life_begins_with_the_first_item_it_took() -> None:
    """A consumer at work before its first item (a program's main thread starting its process
    pools: a third of a frame busy), then waiting on them for their first results, is taken
    from the frame its input first had items taken in (its throughput, on its own frames):
    busy all along from there, where its start would have made it 0.7 and no bottleneck."""
    rows = [duty(0, 0.3, 0.7, 0), duty(0, 0.1, 0.9, 0), duty(0, 0.05, 0.95, 0)] + [
        duty(0, 1, 0, 0)
    ] * 6
    taken = [0.0, 0.0, 0.0] + [40.0] * 6  # items a second into work, from the fourth frame
    queries = [*STATE, ("throughput(src -> work): mean", "throughput", "items/s", ("mean",))]
    frames = {
        (1, "work"): [(F, [d]) for d in rows],
        (3, "src -> work"): [(F, [ScalarPoint("mean", v)]) for v in taken],
    }
    w = {b.stage: b for b in stage_breakdown(make_run(queries, frames))}["work"]
    assert w.frames == tuple(range(3, 9)) and w.busy == pytest.approx(1.0)
    unknown = {
        b.stage: b for b in stage_breakdown(make_run(STATE, {(1, "work"): frames[1, "work"]}))
    }
    assert unknown["work"].frames == tuple(range(9))  # its input's items not measured: as before
    assert unknown["work"].busy == pytest.approx((0.3 + 0.1 + 0.05 + 6) / 9)


def test_channel_summary_categories() -> None:
    chans = {c.channel: c for c in channel_summary(bottleneck_run())}
    a = chans["src -> work"]
    assert a.full_fraction == pytest.approx(0.9) and a.empty_fraction == 0
    assert a.blocking == a.full_fraction and a.idle == 0
    assert a.transferring == pytest.approx(0.1)
    assert a.mean_occupancy == pytest.approx(3.9) and a.max_occupancy == 4
    assert a.throughput_per_s is None  # not queried
    b = chans["work -> sink"]
    assert b.empty_fraction == pytest.approx(0.9)
    json.dumps(a.to_dict(), allow_nan=False)


def test_findings_name_the_busy_stage_with_full_input_and_empty_output() -> None:
    fs = findings(bottleneck_run())
    top = fs[0]
    assert (top.kind, top.severity, top.target) == ("bottleneck", "problem", "work")
    assert top.evidence["input_full_fraction"] == pytest.approx(0.9)
    assert top.evidence["output_empty_fraction"] == pytest.approx(0.9)
    assert top.evidence["busy_frames"] == [[0, 1]]
    assert "full 90 %" in top.detail and "busy 95 %" in top.detail
    json.dumps([f.to_dict() for f in fs], allow_nan=False)


def test_only_a_busy_source_means_no_bottleneck() -> None:
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
        (0, "src"): [(F, [duty(0, 0.99, 0, 0.01)])],
        (1, "work"): [(F, [duty(0, 0.3, 0.7, 0)])],
        (2, "sink"): [(F, [duty(0, 0.1, 0.9, 0)])],
    }
    fs = findings(make_run(STATE, frames))
    assert [f.kind for f in fs] == ["no_bottleneck"]
    assert "src" in fs[0].detail


def test_without_states_findings_ask_for_them() -> None:
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
        (0, "src -> work"): [(F, [ScalarPoint("mean", 0.5), ScalarPoint("max", 2.0)])],
    }
    fs = findings(make_run(OCC[:1], frames))
    assert [f.kind for f in fs] == ["missing_queries"]
    assert "state(" in fs[0].title


def test_littles_law_mismatch_warns() -> None:
    qs = [
        ("occupancy(src -> work): mean", "occupancy", "items", ("mean",)),
        ("throughput(src -> work): mean", "throughput", "items/s", ("mean",)),
        ("latency(src -> work): mean", "latency", "ns", ("mean",)),
    ]

    def run_with(latency_ns: float) -> Run:
        frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
            (0, "src -> work"): [(F, [ScalarPoint("mean", 2.0)])] * 3,
            (1, "src -> work"): [(F, [ScalarPoint("mean", 1000.0)])] * 3,
            (2, "src -> work"): [(F, [ScalarPoint("mean", latency_ns)])] * 3,
        }
        return make_run(qs, frames)

    good = [f for f in findings(run_with(2e6)) if f.kind == "littles_law"]
    assert len(good) == 1 and good[0].severity == "info"
    assert good[0].evidence["ratio"] == pytest.approx(1.0)
    bad = [f for f in findings(run_with(4e6)) if f.kind == "littles_law"]
    assert bad[0].severity == "warning" and bad[0].evidence["ratio"] == pytest.approx(0.5)


def test_drops_violations_and_failure_are_findings() -> None:
    qs = [("occupancy(src -> work): mean, violations", "occupancy", "items", ("mean",))]
    frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
        (0, "src -> work"): [
            (F, [ScalarPoint("mean", 1.0), ScalarPoint("violations", 0.0)]),
            (F, [ScalarPoint("mean", 1.0), ScalarPoint("violations", 3.0)]),
        ],
    }
    drops = [DropCount(1, 0, 0, 10), DropCount(1, 1, 5, 10), DropCount(2, 0, 0, 7)]
    fs = findings(make_run(qs, frames, status="failed", drops=drops))
    kinds = [f.kind for f in fs]
    assert kinds[0] == "failed_run" and fs[0].severity == "problem" and "boom" in fs[0].detail
    (drop,) = [f for f in fs if f.kind == "drops"]
    assert drop.evidence["dropped"] == 5 and drop.evidence["frames"] == [[1, 1]]
    assert drop.target == "src -> work"
    (viol,) = [f for f in fs if f.kind == "violations"]
    assert viol.evidence["violations"] == 3 and viol.evidence["frames"] == [[1, 1]]


def test_frame_ranges() -> None:
    assert frame_ranges([5, 0, 1, 2, 2]) == [[0, 2], [5, 5]]
    assert frame_ranges([]) == []


def test_direction_of_each_metric() -> None:
    assert direction("throughput", "mean") == "higher"
    assert direction("latency", "p99") == "lower"
    assert direction("occupancy", "mean") == "lower"
    assert direction("state", "duty.blocked_out") == "lower"
    assert direction("state", "duty.busy") == "neutral"
    assert direction("latency", "count") == "neutral"


def test_compare_synthetic_runs() -> None:
    qs = [
        ("throughput(work -> sink): mean", "throughput", "items/s", ("mean",)),
        ("latency(src -> work): mean", "latency", "ns", ("mean",)),
        ("state(work): duty", "state", "state", ("duty",)),
    ]

    def run_with(thr: float, lat: float, busy: float, extra: bool, dur: int) -> Run:
        frames: dict[tuple[int, str], Sequence[tuple[int, Sequence[Point]]]] = {
            (0, "work -> sink"): [(F, [ScalarPoint("mean", thr)])],
            (1, "src -> work"): [(F, [ScalarPoint("mean", lat)])],
            (2, "work"): [(F, [duty(0, busy, 0, 1 - busy)])],
        }
        more = [("count(src -> work): sum", "count", "items", ("sum",))] if extra else []
        return make_run(qs + more, frames, duration_ns=dur, name="b" if extra else "a")

    a = run_with(100.0, 1e6, 0.5, False, 10 * F)
    b = run_with(200.0, 1.02e6, 0.8, True, 5 * F)
    c = compare(a, b)
    assert c.row("query", "mean", target="work -> sink").verdict == "better"
    assert c.row("query", "mean", target="src -> work").verdict == "same"  # +2 % < 5 %
    assert c.row("query", "duty.busy").verdict == "changed"
    assert c.row("query", "duty.blocked_out").verdict == "better"
    assert c.row("run", "duration_ns").verdict == "better"
    assert c.row("run", "status").verdict == "same"
    assert c.only_b == ("count(src -> work): sum [src -> work]",) and not c.only_a
    assert c.summary.startswith("run B (b) against A (a): ")
    assert "1 query only in B" in c.summary
    strict = compare(a, b, tolerance=0.01)
    assert strict.row("query", "mean", target="src -> work").verdict == "worse"
    doc = c.to_dict()
    json.dumps(doc, allow_nan=False)
    assert doc["counts"]["better"] == c.counts["better"] >= 3
    with pytest.raises(ValueError, match="negative"):
        compare(a, b, tolerance=-1)


def test_frames_where_a_stage_was_not_observed_weigh_nothing_in_whole_run_figures() -> None:
    """A worker that started late, or is gone, has frames with no observed time (duty
    fractions all 0): the whole-run busy fraction is over the frames it was seen in."""
    from streamscope.aggregate.points import DutyPoint, FrameResult
    from streamscope.report.summary import _overall

    labels = ("idle", "busy", "blocked_in", "blocked_out")
    frames = [
        FrameResult(0, "w", k, k * 10, (k + 1) * 10, 10, (DutyPoint(labels, fr),))
        for k, fr in enumerate([(0.0, 0.0, 0.0, 0.0), (0.0, 1.0, 0.0, 0.0), (0.0, 0.9, 0.1, 0.0)])
    ]
    assert _overall(frames, "state") == "busy=95%  blocked_in=5%"


def test_whole_run_figures_count_violations_and_keep_the_widest_bounds() -> None:
    """A crossing latency's frames: its violations are a count (not ns), added over the run;
    its uncertainty is the widest frame's, written as a frame's is."""
    from streamscope.aggregate.points import FrameResult, ScalarPoint
    from streamscope.report.summary import _overall

    frames = [
        FrameResult(
            0,
            "a -> b",
            k,
            k * 10,
            (k + 1) * 10,
            10,
            (
                ScalarPoint("mean", 2_000_000.0),
                ScalarPoint("violations", float(v)),
                ScalarPoint("uncertainty_ns", u),
            ),
        )
        for k, (v, u) in enumerate([(0, 3000.0), (2, 8000.0), (1, 5000.0)])
    ]
    assert _overall(frames, "ns") == "mean=2ms  violations=3  uncertainty=±8us"
