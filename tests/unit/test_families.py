"""Past ``FAMILY_AT`` targets, stages or channels, the report shows a family of numbered ones as
one: its figures per frame from its members' (mean each on average, max the largest, histogram
weights added, a stage family's states the average of its workers), one box or edge in the
graph, one finding with the rest named; at or under it, each as before."""

from __future__ import annotations

import re

import pytest

from streamscope.analysis import ChannelSummary, Finding
from streamscope.core.topology import FAMILY_AT, ChannelInfo, StageInfo, Topology
from streamscope.report.data import QuerySeries, TargetSeries
from streamscope.report.families import grouped, numbers
from streamscope.report.figures import timeseries
from streamscope.report.graph import pipeline_svg
from streamscope.report.sections.findings import _alike

S = 1_000_000_000


def _channel(k: int, mean: float, top: float, covered: int, weights: list[float]) -> TargetSeries:
    name = "maker -> taker" if k == 1 else f"maker -> taker #{k}"
    return TargetSeries(
        name, frames=[0], t_start_ns=[0], t_end_ns=[S], covered_ns=[covered],
        stats={"mean": [mean], "max": [top], "p99": [top]},
        edges=[0.0, 1.0, 2.0], weights=[weights], under=[0.0], over=[float(k)],
    )  # fmt: skip


def _query(targets: list[TargetSeries], metric: str = "occupancy") -> QuerySeries:
    return QuerySeries(0, f"{metric}(* -> *)", metric, "items", S, ("mean", "max"), targets)


def test_a_family_of_channels_is_one_series_with_its_members_figures_together() -> None:
    members = [_channel(k, float(k), 10.0 * k, S // k, [k, 2.0 * k]) for k in range(1, 21)]
    q = grouped(_query(members))
    (fam,) = q.targets
    assert (fam.target, fam.members) == ("maker -> taker", 20)
    weights = [S // k for k in range(1, 21)]
    want = sum(k * w for k, w in zip(range(1, 21), weights, strict=True)) / sum(weights)
    assert fam.stats["mean"][0] == pytest.approx(want)  # each on average, by observed time
    assert fam.stats["max"] == [200.0]  # the largest
    assert "p99" not in fam.stats  # quantiles of several do not add up to the family's
    assert fam.weights == [[210.0, 420.0]] and fam.over == [210.0]  # the weights added
    fig = timeseries(q)
    assert fig is not None
    assert [t["name"] for t in fig["data"]] == [
        "maker -&gt; taker (20 channels, each on average)",
        "maker -&gt; taker (20 channels, max: the largest)",
    ]


def test_at_the_threshold_every_target_keeps_its_own_series() -> None:
    members = [_channel(k, 1.0, 1.0, S, [1.0, 1.0]) for k in range(1, FAMILY_AT + 1)]
    q = _query(members)
    assert grouped(q) is q


def test_a_stage_familys_states_are_the_average_of_its_workers_observed() -> None:
    def worker(k: int, busy: float, covered: int) -> TargetSeries:
        stats: dict[str, list[float | None]] = {
            "duty.busy": [busy], "duty.idle": [1 - busy if covered else 0.0],
        }  # fmt: skip
        return TargetSeries(f"produce #{k}", [3], [3 * S], [4 * S], [covered], stats)

    # one worker that was not observed in the frame (every state 0) counts for nothing
    workers = [worker(k, 0.5, S) for k in range(2, FAMILY_AT + 2)]
    workers += [worker(99, 1.0, S // 2), worker(100, 0.0, 0)]
    (fam,) = grouped(_query(workers, "state")).targets
    want = (0.5 * FAMILY_AT + 1.0 * 0.5) / (FAMILY_AT + 0.5)
    assert fam.stats["duty.busy"][0] == pytest.approx(want)
    assert fam.stats["duty.busy"][0] + fam.stats["duty.idle"][0] == pytest.approx(1.0)  # type: ignore[operator]


def test_members_are_written_compactly() -> None:
    names = ["maker -> taker", *(f"maker -> taker #{k}" for k in (2, 3, 4, 7, 9, 10))]
    assert numbers(names) == "maker -> taker, #2–#4, #7, #9–#10"
    assert numbers(["produce #26 -> consume #26", "produce #27 -> consume #27"]) == "#26–#27"


def test_findings_alike_on_one_family_are_one_with_the_rest_named() -> None:
    def law(target: str) -> Finding:
        return Finding("littles_law", "info", target, f"holds on {target}", "")

    fs = [law("a -> b"), *(law(f"a -> b #{k}") for k in range(2, 6)), law("c -> d"),
          law("a -> b #3"), Finding("stall", "info", "a -> b #9", "", "")]  # fmt: skip
    shown = [(f.target, [a.target for a in alike]) for f, alike in _alike(fs)]
    assert shown == [
        ("a -> b", ["a -> b #2", "a -> b #3", "a -> b #4", "a -> b #5"]),
        ("c -> d", []),
        ("a -> b #3", []),  # a second finding on one subject stands on its own
        ("a -> b #9", []),  # another kind
    ]


def test_the_graph_draws_a_family_of_stages_and_channels_as_one() -> None:
    n = FAMILY_AT + 8
    workers = [f"work #{k}" for k in range(2, n + 2)]
    topology = Topology(
        "many",
        stages=(StageInfo("src", "main", "source"),
                *(StageInfo(w, "main", "stage") for w in workers)),
        channels=tuple(ChannelInfo(f"src -> {w}", "src", w, 4) for w in workers),
    )  # fmt: skip
    figures = {
        c.name: ChannelSummary(c.name, c.src, c.dst, 4, "thread", 1.0, 4.0, 0.1, 0.2, 50.0)
        for c in topology.channels
    }
    svg = pipeline_svg(topology, {}, figures)
    assert len(re.findall(r'class="ss-stage-box"', svg)) == 2
    assert 'data-stage="work" data-members="20"' in svg
    assert len(re.findall(r'class="ss-channel-line"', svg)) == 1
    assert 'data-channel="src -&gt; work" data-members="20"' in svg
    assert "20 channels · 50/s each" in svg
