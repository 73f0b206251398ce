"""findings() on real runs: the bottleneck stage, a balanced pipeline, Little's law, lost records."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import streamscope as ss
from streamscope.analysis import Finding, channel_summary, findings, stage_breakdown

STAGES = ("src", "work", "sink")
CHANNELS = ("src -> work", "work -> sink")


def queries() -> list[str]:
    return [
        *(f"state({s}): duty every 100ms" for s in STAGES),
        *(f"occupancy({c}): mean, max, histogram every 100ms" for c in CHANNELS),
        *(f"throughput({c}): mean every 100ms" for c in CHANNELS),
        *(f"latency({c}): mean every 100ms" for c in CHANNELS),
    ]


def sleeper(seconds: float) -> Callable[[Any], Any]:
    def fn(x: Any) -> Any:
        time.sleep(seconds)
        return x

    return fn


def paced(n: int, seconds: float) -> Iterator[int]:
    for i in range(n):
        time.sleep(seconds)
        yield i


def run_chain(path: Path, src: Any, work: Any, sink: Any, **opts: Any) -> ss.Run:
    p = ss.Pipeline(path.stem)
    p.add("src", src)
    p.add("work", work)
    p.add("sink", sink)
    p.chain(*STAGES, capacity=8)
    res = ss.run(p, queries(), ss.RunOptions(out=path, mode="inline", **opts))
    assert res.status == "completed", res.error
    return ss.load(path)


@pytest.fixture(scope="module")
def slow_middle(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ss.Run]:
    path = tmp_path_factory.mktemp("findings") / "slow_middle.duckdb"
    # 10 ms an item: beside a busy core the sink's own wakeups (up to ~1.5 ms an item) stay a
    # small part of work's pace, so work's output is mostly empty (2 ms was not, once).
    with run_chain(path, range(100), sleeper(0.01), lambda x: None) as run:
        yield run


@pytest.fixture(scope="module")
def slow_sink(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ss.Run]:
    path = tmp_path_factory.mktemp("findings") / "slow_sink.duckdb"
    with run_chain(path, range(250), lambda x: x, sleeper(0.002)) as run:
        yield run


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ss.Run]:
    """The source sleeps 3 ms per item; work 1 ms and the sink 0.5 ms keep up with it."""
    path = tmp_path_factory.mktemp("findings") / "balanced.duckdb"
    with run_chain(path, paced(180, 0.003), sleeper(0.001), sleeper(0.0005)) as run:
        yield run


def bottlenecks(fs: list[Finding]) -> list[Finding]:
    return [f for f in fs if f.kind == "bottleneck"]


def test_slow_middle_stage_is_the_bottleneck(slow_middle: ss.Run) -> None:
    fs = findings(slow_middle)
    found = bottlenecks(fs)
    assert [f.target for f in found] == ["work"], [f.title for f in fs]
    top = found[0]
    assert top.severity == "problem"
    assert fs[0] is top, "the most severe finding comes first"
    assert top.title == "stage work is rate-limiting"
    assert top.evidence["input_channel"] == "src -> work"
    assert top.evidence["output_channel"] == "work -> sink"
    assert top.evidence["busy"] >= 0.8
    assert top.evidence["input_full_fraction"] >= 0.5
    assert top.evidence["output_empty_fraction"] >= 0.5
    assert top.evidence["busy_frames"], "the frames the evidence comes from"
    assert "busy" in top.detail and "%" in top.detail
    assert "larger buffer will not help" in top.suggestion
    # The source waits on its output but is not blamed.
    assert not any(f.target == "src" for f in found)
    json.dumps([f.to_dict() for f in fs], allow_nan=False)


def test_slow_sink_is_the_bottleneck(slow_sink: ss.Run) -> None:
    found = bottlenecks(findings(slow_sink))
    assert [f.target for f in found] == ["sink"]
    assert found[0].evidence["input_channel"] == "work -> sink"
    assert found[0].evidence["role"] == "sink"


def test_balanced_pipeline_has_no_bottleneck(balanced: ss.Run) -> None:
    fs = findings(balanced)
    assert not bottlenecks(fs), [f.title for f in fs]
    nb = [f for f in fs if f.kind == "no_bottleneck"]
    assert len(nb) == 1
    assert nb[0].severity == "info"
    assert "src" in nb[0].detail  # the paced source sets the rate
    assert all(f.severity == "info" for f in fs)


def test_breakdowns_match_the_recorded_states(slow_middle: ss.Run) -> None:
    by_stage = {b.stage: b for b in stage_breakdown(slow_middle)}
    assert list(by_stage) == list(STAGES)
    for b in by_stage.values():
        assert b.busy is not None and b.idle is not None
        assert b.blocked_in is not None and b.blocked_out is not None
        total = b.idle + b.busy + b.blocked_in + b.blocked_out
        assert total == pytest.approx(1.0, abs=1e-6)
        assert b.computation == b.busy
        assert b.communication == pytest.approx(b.blocked_in + b.blocked_out)
        assert b.other == b.idle
    # the source waits to put, the sink waits to get: communication dominates both
    assert by_stage["src"].blocked_out > by_stage["src"].busy
    assert by_stage["sink"].blocked_in > by_stage["sink"].busy
    chans = {c.channel: c for c in channel_summary(slow_middle)}
    into, out = chans["src -> work"], chans["work -> sink"]
    assert into.full_fraction is not None and out.empty_fraction is not None
    assert into.blocking == into.full_fraction and out.idle == out.empty_fraction
    assert into.transferring is not None
    assert into.full_fraction + into.empty_fraction + into.transferring == pytest.approx(1.0)
    assert into.full_fraction > out.full_fraction
    assert into.throughput_per_s is not None and into.throughput_per_s > 0
    assert into.max_occupancy == 8
    assert not into.virtual and into.verdict is None


@pytest.mark.parametrize("which", ["slow_middle", "slow_sink", "balanced"])
def test_littles_law_holds_on_every_channel(which: str, request: pytest.FixtureRequest) -> None:
    run: ss.Run = request.getfixturevalue(which)
    checks = {f.target: f for f in findings(run) if f.kind == "littles_law"}
    assert set(checks) == set(CHANNELS)
    for f in checks.values():
        assert f.severity == "info", f.detail
        ev = f.evidence
        assert ev["ratio"] == pytest.approx(ev["L_items"] / ev["lambda_W_items"], rel=1e-3)
        assert abs(ev["ratio"] - 1) <= ev["tolerance"]


def test_lost_probe_records_are_a_finding(tmp_path: Path) -> None:
    """Tiny tap buffers and a flood of items: the taps refuse records, and findings say so."""
    p = ss.Pipeline("flood")
    p.add("src", range(40_000))
    p.add("sink", lambda x: None)
    p.connect("src", "sink", capacity=8)
    path = tmp_path / "flood.duckdb"
    res = ss.run(
        p,
        ["occupancy(src -> sink): mean every 100ms"],
        ss.RunOptions(out=path, mode="inline", tap_capacity=16),
    )
    assert res.status == "completed", res.error
    with ss.load(path) as run:
        lost = sum(d.dropped for d in run.drops())
        assert lost > 0, "the taps did not overflow; the test needs a smaller tap_capacity"
        drops = [f for f in findings(run) if f.kind == "drops"]
        assert drops
        assert sum(f.evidence["dropped"] for f in drops) == lost
        # The channel's taps, the stages' own state trackers and the process's stack sampler
        # (always on) overflow alike; the sampler's are named as its samples, not its file.
        assert {f.target for f in drops} <= {"src -> sink", "src", "sink", "stack samples"}
        assert "src -> sink" in {f.target for f in drops}
        assert all(f.severity == "warning" and f.evidence["frames"] for f in drops)
        assert all("tap_capacity" in f.suggestion for f in drops)
        # no state queries: findings say what to add rather than guess
        missing = [f for f in findings(run) if f.kind == "missing_queries"]
        assert missing and "state(" in missing[0].title


def test_hand_instrumented_workers_are_judged_as_one_group() -> None:
    """A threads-and-queues program: its queues name the group (``reader -> parser``), each
    worker names its own stage (``parser0`` .. ``parser3``). The workers are slow, the reader
    fast: the finding names the group, through the queues that name it."""
    import threading

    from streamscope.pipeline.program.dropin import REGISTRY

    REGISTRY.stages.clear()
    REGISTRY.queues.clear()
    workers, items = 4, 200
    q_in = ss.Queue(8, src="reader", dst="parser")
    q_out = ss.Queue(8, src="parser", dst="writer")

    def reader() -> None:
        with ss.stage("reader"):
            for i in range(items):
                q_in.put(i)
            for _ in range(workers):
                q_in.put(None)

    def parser(i: int) -> None:
        with ss.stage(f"parser{i}"):
            while (x := q_in.get()) is not None:
                time.sleep(0.004)
                q_out.put(x)
            q_out.put(None)

    def writer() -> None:
        with ss.stage("writer"):
            done = 0
            while done < workers:
                done += q_out.get() is None

    queries = [
        "state(*): duty every 100ms",
        "occupancy(reader -> parser): mean, histogram every 100ms",
        "occupancy(parser -> writer): mean, histogram every 100ms",
    ]
    try:
        with ss.monitor(queries, ss.RunOptions(mode="inline")) as m:
            threads = [threading.Thread(target=reader), threading.Thread(target=writer)]
            threads += [threading.Thread(target=parser, args=(i,)) for i in range(workers)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        REGISTRY.stages.clear()
        REGISTRY.queues.clear()
    assert m.result is not None and m.result.status == "completed", m.result
    run = ss.Run.from_memory(m.result.store)  # type: ignore[arg-type]
    found = findings(run)
    (top,) = bottlenecks(found)
    assert top.target == "parser0\u2013parser3", [f.title for f in found]
    assert top.title.startswith("parser0\u2013parser3 are rate-limiting together")
    assert top.evidence["members"] == [f"parser{i}" for i in range(workers)]
    assert top.evidence["aliases"] == ["parser"]
    assert top.evidence["input_channel"] == "reader -> parser"
    assert top.suggestion.startswith("add replicas (more parser stages)")
