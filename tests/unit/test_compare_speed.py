"""compare() leads with whether run B is faster: throughput and duration, said plainly."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from rich.console import Console

from oracles import THREE_STAGES
from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.analysis import Comparison, compare
from streamscope.cli.compare import print_comparison
from streamscope.store.reader import Run
from streamscope.store.writer import InMemoryStore, QueryRecord, RunMeta

F = 100_000_000
TOPO = THREE_STAGES
OUT = "throughput(work -> sink): mean"
IN = "throughput(src -> work): mean"


def make_run(
    name: str,
    rates: dict[str, dict[str, Sequence[float]]],
    duration_ns: int | None,
    *,
    status: str = "completed",
) -> Run:
    """``rates``: query text → target → the mean rate (items/s) of each whole frame."""
    store = InMemoryStore()
    queries = [
        QueryRecord(i, text, "throughput", "items/s", F, tuple(by_target), ("mean",))
        for i, (text, by_target) in enumerate(rates.items())
    ]
    store.begin(RunMeta("id", name, "", "", (), "h", 0, F, "0"), TOPO, queries)
    store.write_frames(
        [
            FrameResult(q.id, target, k, k * F, (k + 1) * F, F, (ScalarPoint("mean", v),))
            for q, by_target in zip(queries, rates.values(), strict=True)
            for target, values in by_target.items()
            for k, v in enumerate(values)
        ]
    )
    store.write_drops([])
    store.finish(status, "boom" if status == "failed" else None, 1, duration_ns)
    return Run.from_memory(store)


def steady(rate: float, frames: int = 8) -> dict[str, dict[str, Sequence[float]]]:
    return {OUT: {"work -> sink": [rate] * frames}}


def test_faster_is_said_plainly_and_first() -> None:
    a = make_run("slow", steady(100.0, 10), 10 * F)
    b = make_run("fast", steady(200.0, 5), 5 * F)
    c = compare(a, b)
    assert c.speed is not None
    assert (c.speed.verdict, c.speed.basis) == ("faster", "throughput")
    assert c.speed.throughput_a == pytest.approx(100) and c.speed.throughput_b == pytest.approx(200)
    assert c.speed.throughput_change == pytest.approx(1.0)
    assert c.speed.duration_change == pytest.approx(-0.5)
    assert c.speed.items_a == pytest.approx(100) == c.speed.items_b
    assert c.headline == (
        "Run B (fast) is faster than run A (slow): throughput 200 items/s against 100 on "
        "work -> sink (+100 %); duration 0.5 s against 1 s (-50 %)."
    )
    # The rows lead with the run's figures, the headline throughput among them (not recounted).
    assert [r.stat for r in c.rows[:4]] == [
        "status",
        "throughput",
        "duration_ns",
        "dropped_records",
    ]
    thr = c.row("run", "throughput")
    assert thr.verdict == "better" and not thr.counted
    doc = c.to_dict()
    json.dumps(doc, allow_nan=False)
    assert doc["speed"]["verdict"] == "faster" and doc["headline"] == c.headline


def test_slower_is_said_plainly() -> None:
    c = compare(
        make_run("fast", steady(200.0, 5), 5 * F), make_run("slow", steady(100.0, 10), 10 * F)
    )
    assert c.speed is not None and c.speed.verdict == "slower"
    assert c.headline.startswith("Run B (slow) is slower than run A (fast): throughput 100 items/s")
    assert c.row("run", "throughput").verdict == "worse"


def test_same_within_the_tolerance_says_what_same_means() -> None:
    c = compare(make_run("a", steady(100.0), 8 * F), make_run("b", steady(103.0), 8 * F))
    assert c.speed is not None and c.speed.verdict == "same"
    assert c.headline.startswith("Run B (b) is as fast as run A (a), within the 5 % tolerance: ")
    strict = compare(
        make_run("a", steady(100.0), 8 * F), make_run("b", steady(103.0), 8 * F), tolerance=0.01
    )
    assert strict.speed is not None and strict.speed.verdict == "faster"


def test_a_change_within_the_frames_spread_is_not_called_faster() -> None:
    """+10 %, beyond the 5 % tolerance, but the frames swing by ±50 %: not clearly faster."""
    a = make_run("a", {OUT: {"work -> sink": [50.0, 150.0] * 4}}, 8 * F)
    b = make_run("b", {OUT: {"work -> sink": [60.0, 160.0] * 4}}, 8 * F)
    c = compare(a, b)
    assert c.speed is not None and c.speed.noise is not None and c.speed.noise > 0.1
    assert c.speed.throughput_change == pytest.approx(0.1)
    assert c.speed.verdict == "same"
    assert "as fast as run A (a), within the frames' own spread (±" in c.headline
    assert c.row("run", "throughput").verdict == "same"
    assert c.row("query", "mean", target="work -> sink").verdict == "better"  # tolerance only


def test_too_few_frames_to_gauge_the_noise_is_said() -> None:
    c = compare(make_run("a", steady(100.0, 2), 2 * F), make_run("b", steady(101.0, 2), 2 * F))
    assert c.speed is not None and c.speed.noise is None and c.speed.verdict == "same"
    assert "(too few frames to gauge their spread)" in c.headline


def test_without_a_shared_throughput_the_duration_decides_with_a_caveat() -> None:
    c = compare(make_run("a", {}, 10 * F), make_run("b", {}, 6 * F))
    assert c.speed is not None and (c.speed.verdict, c.speed.basis) == ("faster", "duration")
    assert c.headline.startswith("Run B (b) is faster than run A (a) by duration alone: duration")
    assert "only if both did the same work" in c.headline
    with pytest.raises(KeyError):
        c.row("run", "throughput")


def test_an_incomplete_run_cannot_be_called_faster() -> None:
    c = compare(
        make_run("a", steady(100.0), 8 * F), make_run("b", steady(300.0, 2), 2 * F, status="failed")
    )
    assert c.speed is not None and c.speed.verdict == "unknown"
    assert c.headline.startswith(
        "Cannot say whether run B (b) is faster than run A (a): run B failed"
    )
    nothing = compare(make_run("a", {}, None), make_run("b", {}, 5 * F))
    assert nothing.speed is not None and nothing.speed.verdict == "unknown"
    assert nothing.headline.startswith("Cannot say whether run B (b) is faster")


def test_higher_throughput_but_longer_on_the_same_items_is_mixed() -> None:
    a = make_run("a", steady(100.0, 8), 10 * F)
    b = make_run("b", steady(200.0, 4), 12 * F)  # same 80 items, but a longer run
    c = compare(a, b)
    assert c.speed is not None and c.speed.verdict == "mixed"
    assert c.headline.startswith("Run B (b) has the higher throughput but took longer")


def test_different_work_makes_durations_not_like_for_like() -> None:
    c = compare(make_run("a", steady(100.0, 4), 4 * F), make_run("b", steady(200.0, 8), 8 * F))
    assert c.speed is not None and c.speed.verdict == "faster"
    assert "the durations are not like for like" in c.headline


def test_the_rate_into_the_sink_leads_and_a_pattern_counts_every_target() -> None:
    """Two throughput queries: the one into the sink leads; its targets' rates add up."""
    both = {
        IN: {"src -> work": [500.0] * 4},
        OUT: {"work -> sink": [40.0] * 4, "x -> sink": [60.0] * 4},
    }
    more = {
        IN: {"src -> work": [500.0] * 4},
        OUT: {"work -> sink": [90.0] * 4, "x -> sink": [90.0] * 4},
    }
    c = compare(make_run("a", both, 4 * F), make_run("b", more, 4 * F))
    assert c.speed is not None and c.speed.throughput_query == OUT
    assert c.speed.throughput_a == pytest.approx(100) and c.speed.throughput_b == pytest.approx(180)
    assert c.speed.verdict == "faster"


def test_the_printed_comparison_leads_with_the_headline() -> None:
    c: Comparison = compare(
        make_run("slow", steady(100.0, 10), 10 * F), make_run("fast", steady(200.0, 5), 5 * F)
    )
    console = Console(record=True, width=100, color_system=None)
    print_comparison(c, console)
    text = console.export_text()
    lines = text.splitlines()
    assert lines[0] == c.headline  # whole, on the first line, however narrow the terminal
    assert text.index(c.headline) < text.index("A = slow") < text.index(c.summary)


def test_a_querys_figures_of_quality_keep_their_own_units() -> None:
    """A throughput query's time bound is in ns and its violations a count, not items/s."""
    from streamscope.analysis.compare import stat_unit

    assert stat_unit("items/s", "mean") == "items/s"
    assert stat_unit("items/s", "uncertainty_ns") == "ns"
    assert stat_unit("items/s", "violations") == ""
    assert stat_unit("items", "w1_items") == ""
    assert stat_unit("ns", "p99") == "ns"


def test_a_runs_start_and_drain_are_not_taken_for_its_noise() -> None:
    """Steady frames, +34 %, each run starting in its first frame and draining in its last:
    faster. Those two frames' rates are a change of rate, not a spread (taken for one, the
    band was +-42 % and the run was said to be as fast)."""
    a = make_run("a", {OUT: {"work -> sink": [20.0, *[100.0, 104.0, 96.0] * 2, 10.0]}}, 8 * F)
    b = make_run("b", {OUT: {"work -> sink": [30.0, *[134.0, 139.0, 129.0] * 2, 15.0]}}, 8 * F)
    c = compare(a, b)
    assert c.speed is not None and c.speed.noise is not None and c.speed.noise < 0.1
    assert c.speed.verdict == "faster", c.headline
    # the same frames in another order: a swing within the run is spread, as before
    a = make_run(
        "a", {OUT: {"work -> sink": [100.0, 20.0, 104.0, 10.0, 96.0, 100.0, 104.0, 96.0]}}, 8 * F
    )
    b = make_run(
        "b", {OUT: {"work -> sink": [134.0, 30.0, 139.0, 15.0, 129.0, 134.0, 139.0, 129.0]}}, 8 * F
    )
    assert compare(a, b).speed.verdict == "same"  # type: ignore[union-attr]
