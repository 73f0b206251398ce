"""The engine: frames close only when every live agent has passed them; nothing is lost."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from streamscope.aggregate.points import DropCount, FrameResult, HistogramPoint, ScalarPoint
from streamscope.core.options import RunOptions
from streamscope.core.records import Kind, make_records
from streamscope.monitor.engine import Engine
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.runtime.session import prepare
from streamscope.transport.wire import Message, MsgType

T0 = 1_000_000
#: The tests' unit of time: frames of 100 of them are 10 ms, the shortest a query may ask for.
U = 100_000


def _engine(
    queries: list[str], frame_ns: int = 100 * U
) -> tuple[Engine, list[FrameResult], list[DropCount]]:
    p = Pipeline("t")
    p.add("a", range(3))
    p.add("b", lambda x: x)
    p.connect("a", "b", capacity=4)
    plan, topo = prepare(p, queries, frame_ns)
    got: list[FrameResult] = []
    drops: list[DropCount] = []

    def sink(r: Sequence[FrameResult], d: Sequence[DropCount]) -> None:
        got.extend(r)
        drops.extend(d)

    eng = Engine(plan, topo, frame_ns, sink)
    eng.handle(
        Message(
            MsgType.START,
            0,
            1,
            T0,
            make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64)),
            {},
        )
    )
    return eng, got, drops


def _batch(agent: int, wm: int, kind: int, probe: int, t: list[int], v: list[int]) -> Message:
    rec = make_records(kind, probe, np.array(t, np.int64) * U + T0, np.array(v, np.int64))
    return Message(MsgType.BATCH, agent, 1, wm * U + T0, rec, {})


def test_frames_wait_for_the_slowest_agent() -> None:
    eng, got, _ = _engine(["occupancy(a -> b): mean every 10ms"])
    tail = next(p.id for p in eng.topology.probes if p.kind == "tail")
    head = next(p.id for p in eng.topology.probes if p.kind == "head")
    eng.handle(_batch(1, 250, Kind.PUT, tail, [10, 20], [1, 2]))
    eng.handle(_batch(2, 50, Kind.GET, head, [30], [1]))
    eng.advance()
    assert got == []  # agent 2 has only reached 50 ns
    eng.handle(_batch(2, 260, Kind.GET, head, [120], [2]))
    eng.advance()
    assert [r.frame for r in got] == [0, 1]
    # frame 0: 0 for 10, 1 for 10, 2 for 10, 1 for 70 -> mean (10+20+70)/100
    assert got[0].point("mean") == ScalarPoint("mean", 1.0)
    # frame 1: 1 until 120, then 0
    assert got[1].point("mean") == ScalarPoint("mean", 0.2)


def test_finish_emits_every_frame_including_empty_and_partial_ones() -> None:
    eng, got, _ = _engine(
        ["occupancy(a -> b): histogram every 10ms", "count(a -> b): sum every 10ms"]
    )
    tail = next(p.id for p in eng.topology.probes if p.kind == "tail")
    eng.handle(_batch(1, 0, Kind.PUT, tail, [5], [1]))
    eng.finish(350 * U)
    occ = [r for r in got if r.query_id == 0]
    assert [r.frame for r in occ] == [0, 1, 2, 3]
    assert [r.covered_ns for r in occ] == [100 * U, 100 * U, 100 * U, 50 * U]
    total = sum(sum(p.weights) for r in occ for p in r.points if isinstance(p, HistogramPoint))
    assert total == 350 * U  # every nanosecond of the run in exactly one frame
    counts = [r.point("sum") for r in got if r.query_id == 1]
    assert [c.value for c in counts if isinstance(c, ScalarPoint)] == [1.0, 0.0, 0.0, 0.0]


def test_drops_are_reported_per_probe_and_frame() -> None:
    eng, _, drops = _engine(["count(a -> b): sum every 10ms"])
    tail = next(p.id for p in eng.topology.probes if p.kind == "tail")
    eng.handle(_batch(1, 0, Kind.PUT, tail, [5, 6], [1, 2]))
    eng.handle(_batch(1, 0, Kind.DROPPED, tail, [150], [3]))
    eng.finish(200 * U)
    by_frame = {d.frame: d for d in drops}
    assert by_frame[0] == DropCount(tail, 0, 0, 2)
    assert by_frame[1] == DropCount(tail, 1, 3, 0)


def test_an_end_before_the_reduced_watermark_cannot_shrink_the_last_frame(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """However the end tick races with the last batch, frames never hold more time than the run."""
    from streamscope.monitor import service
    from streamscope.monitor.service import MonitorService
    from streamscope.monitor.settings import MonitorSettings

    monkeypatch.setattr(service, "DRAIN_S", 0.0)  # reduce after every message
    from streamscope.store.writer import InMemoryStore, RunMeta
    from streamscope.transport.wire import encode

    p = Pipeline("t")
    p.add("a", range(3))
    p.add("b", lambda x: x)
    p.connect("a", "b", capacity=4)
    plan, topo = prepare(p, ["occupancy(a -> b): histogram every 10ms"], 100 * U)
    store = InMemoryStore()
    meta = RunMeta("id", "t", "", "", (), "h", 0, 100, "0")
    svc = MonitorService(plan, topo, store, MonitorSettings(meta, RunOptions(frame_ns=100 * U)))
    tail = next(p.id for p in topo.probes if p.kind == "tail")
    rec = make_records(
        int(Kind.PUT), tail, np.array([T0 + 10 * U], np.int64), np.array([1], np.int64)
    )
    svc.inbox.put(encode(MsgType.START, 0, 1, T0))
    svc.inbox.put(encode(MsgType.BATCH, 0, 1, T0 + 260 * U, rec))
    svc.inbox.put(encode(MsgType.FINISH, 0, 1, T0 + 150 * U, info={"status": "completed"}))
    svc.inbox.put(None)
    final = svc.serve()
    from streamscope.store.reader import Run

    run = Run.from_memory(store)
    frames = run.results(0)
    total = sum(sum(p.weights) for r in frames for p in r.points if isinstance(p, HistogramPoint))
    assert total == sum(r.covered_ns for r in frames) == final.duration_ns == run.duration_ns


def test_records_of_a_domain_never_calibrated_are_counted_as_dropped() -> None:
    from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
    from streamscope.query.compile import compile_queries

    topo = Topology(
        "t",
        resources=(ResourceInfo("main", "thread"), ResourceInfo("dev", "process", "dev", 7.5)),
        stages=(StageInfo("a", "main", "source"), StageInfo("b", "dev", "sink")),
        channels=(ChannelInfo("a -> b", "a", "b", 4, "process"),),
        probes=(ProbeInfo(1, "tail", "a -> b", "host"), ProbeInfo(2, "head", "a -> b", "dev")),
    )
    plan = compile_queries(["count(a -> b): sum every 10ms"], topo, 100 * U).sited(
        topo, trace=False
    )
    drops: list[DropCount] = []
    eng = Engine(plan, topo, 100, lambda r, d: drops.extend(d))
    empty = make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    eng.handle(Message(MsgType.START, 0, 1, T0, empty, {}))
    eng.handle(Message(MsgType.HELLO, 5, 2, 0, empty, {"domain": "dev"}))
    eng.handle(
        Message(
            MsgType.BATCH,
            5,
            2,
            10,
            make_records(int(Kind.GET), 2, np.array([1, 2, 3]), np.array([1, 2, 3])),
            {},
        )
    )
    eng.finish(250)
    assert sum(d.dropped for d in drops if d.probe_id == 2) == 3


def test_a_long_monitor_cycle_is_followed_by_as_long_a_rest() -> None:
    """The monitor cycles every ``DRAIN_S`` while its cycles are short; one that took long (many
    rings, each drained and reduced apart) is followed by a rest as long, ``MAX_REST_S`` at
    most: it takes half a core at most from the program it watches."""
    from streamscope.monitor.service import DRAIN_S, MAX_REST_S, next_cycle

    assert next_cycle(10.0, 10.001) == 10.0 + DRAIN_S  # short: on the beat
    assert next_cycle(10.0, 10.03) == pytest.approx(10.06)  # 30 ms: 30 ms of rest
    assert next_cycle(10.0, 10.2) == pytest.approx(10.2 + MAX_REST_S)  # capped
