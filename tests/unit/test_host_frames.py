"""A cluster host's own frames: which (query, target) pairs a host reduces, the frames it closes
on the run's grid placed on its clock against figures computed here from the same items, and
their way to the monitor."""

from __future__ import annotations

import numpy as np
import pytest

import streamscope as ss
from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.aggregate.shipped import (
    ShippedFrame,
    ShippedFrameError,
    decode_frames,
    encode_frames,
)
from streamscope.core.records import Kind, Records, make_records
from streamscope.core.topology import Topology
from streamscope.pipeline.onboard import LocalReduction
from streamscope.query.plan import Plan
from streamscope.runtime.hostframes import HostFrames
from streamscope.runtime.session import host_pairs, prepare, shipped_probes

FRAME = 100_000_000
QUERIES = [
    "throughput(* -> *) every 100ms",
    "count(* -> *) every 100ms",
    "occupancy(mid -> dst): mean every 100ms",
    "latency(* -> *): mean every 100ms",
    "iteration(dst): mean every 100ms",
]


def _pipeline() -> ss.Pipeline:
    """src on node-a; mid and dst on node-b: ``src -> mid`` a link, ``mid -> dst`` inside."""
    p = ss.Pipeline("h")
    p.add("src", range(3), resource=ss.Host("node-a", clock="rate_ppm=30,offset_s=2"))
    p.add("mid", lambda x: x, resource=ss.Host("node-b"))
    p.add("dst", lambda x: None, resource=ss.Host("node-b"))
    p.connect("src", "mid", capacity=4)
    p.connect("mid", "dst", capacity=8)
    return p


def _prepared(queries: list[str] = QUERIES) -> tuple[Plan, Topology]:
    return prepare(_pipeline(), queries, FRAME)


def _pairs(plan: Plan, topo: Topology, trace: bool = False) -> set[tuple[str, str, str]]:
    return {(host, q.metric, t.name) for host, pairs in plan.host_reduced(topo, trace).items()
            for q, t in pairs}  # fmt: skip


def test_a_host_reduces_what_its_own_taps_measure_and_the_monitor_the_rest() -> None:
    plan, topo = _prepared()
    assert _pairs(plan, topo) == {
        # a link's tail end on the producer's host, its head end on the consumer's
        ("node-a", "count", "src -> mid"),
        ("node-b", "throughput", "src -> mid"),
        # the channel inside node-b: everything, its latency too (one clock)
        ("node-b", "count", "mid -> dst"),
        ("node-b", "throughput", "mid -> dst"),
        ("node-b", "occupancy", "mid -> dst"),
        ("node-b", "latency", "mid -> dst"),
        ("node-b", "iteration", "dst"),
    }
    # The latency across the link pairs each item's two ends, on two hosts: the monitor's.
    here = {(q.metric, t.name) for q, t in plan.monitor_measured(topo, trace=False)}
    assert here == {("latency", "src -> mid")}
    shipped = {(p.kind, p.target) for p in topo.probes if p.id in shipped_probes(plan, topo, False)}
    assert shipped == {("tail", "src -> mid"), ("head", "src -> mid")}
    # Keeping every record (a trace): nothing is reduced away from the monitor.
    assert _pairs(plan, topo, trace=True) == set()
    assert host_pairs(plan, topo, trace=True) == {}


def _records(kind: int, probe: int, ticks: np.ndarray) -> Records:
    return make_records(kind, probe, ticks.astype(np.int64), np.arange(1, len(ticks) + 1))


def _frames(payloads: list[bytes]) -> list[FrameResult]:
    return [f.result for p in payloads for f in decode_frames(p)]


def _channel_case(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Insertion and removal times (ns from the run's start) of a FIFO channel."""
    rng = np.random.default_rng(seed)
    t_in = np.cumsum(rng.exponential(2e6, 400)).astype(np.int64)
    t_out = np.empty_like(t_in)
    free = 0
    for i, t in enumerate(t_in.tolist()):
        free = max(free, t) + int(rng.exponential(1.5e6))
        t_out[i] = free
    return t_in, t_out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_host_s_frames_match_the_items_on_its_own_clock(seed: int) -> None:
    """The channel inside node-b on a clock that runs at 2.5 ticks a ns from tick 7e9: the
    frames closed on the grid placed there hold the counts, the time-weighted occupancy and
    the mean latency computed here from the items' own times, frame by frame."""
    plan, topo = _prepared()
    pairs = host_pairs(plan, topo, trace=False)["node-b"]
    probe = {(p.kind, p.target): p.id for p in topo.probes}
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    origin, per_ns = 7e9, 2.5
    t_in, t_out = _channel_case(seed)
    tail = _records(Kind.PUT, probe[("tail", "mid -> dst")], origin + t_in * per_ns)
    head = _records(Kind.GET, probe[("head", "mid -> dst")], origin + t_out * per_ns)
    # The first flush comes before the grid: it waits for it.
    frames.add(tail[:50])
    assert frames.close_until(int(origin + 1e9 * per_ns)) == []
    frames.set_grid(origin, per_ns)
    out: list[bytes] = []
    cut = int(t_out[-1]) // 2
    frames.add(tail[50:])
    frames.add(head[t_out < cut])
    out += frames.close_until(int(origin + cut * per_ns))
    frames.add(head[t_out >= cut])
    end = int(t_out[-1]) + 10  # (ticks to ns rounds down: the last item stays inside)
    out += frames.finish(int(origin + end * per_ns))
    results = _frames(out)
    by = {(r.query_id, r.frame): r for r in results if r.target == "mid -> dst"}
    qid = {q.metric: q.id for q in plan.queries}
    n_frames = (end - 1) // FRAME + 1
    for k in range(n_frames):
        lo, hi = k * FRAME, min((k + 1) * FRAME, end)
        count = by[(qid["count"], k)].point("sum").value  # type: ignore[union-attr]
        assert count == ((t_in >= lo) & (t_in < hi)).sum()
        rate = by[(qid["throughput"], k)].point("mean").value  # type: ignore[union-attr]
        assert round(rate * (hi - lo) / 1e9) == ((t_out >= lo) & (t_out < hi)).sum()
        taken = (t_out >= lo) & (t_out < hi)
        mean = by[(qid["latency"], k)].point("mean").value  # type: ignore[union-attr]
        if taken.any():
            assert mean == pytest.approx((t_out - t_in)[taken].mean(), abs=1.0)
        occ = by[(qid["occupancy"], k)].point("mean").value  # type: ignore[union-attr]
        grid = np.arange(lo, hi, 1000)
        level = np.searchsorted(t_in, grid, "right") - np.searchsorted(t_out, grid, "right")
        assert occ == pytest.approx(level.mean(), abs=0.01)
    # The frames' edges, in the host's ticks: where the monitor places them by its own fit.
    shipped = [f for p in out for f in decode_frames(p)]
    for f in shipped:
        assert f.lo_ticks == origin + f.result.t_start_ns * per_ns
        assert f.hi_ticks == origin + f.result.t_end_ns * per_ns


def test_a_refined_grid_loses_no_item() -> None:
    """A later burst moves the host's map of its clock back by 40 µs: items already past what
    was reduced are counted all the same, none lost as late."""
    plan, topo = _prepared(["count(mid -> dst) every 100ms"])
    (pairs,) = host_pairs(plan, topo, trace=False).values()
    pid = next(p.id for p in topo.probes if p.kind == "tail")
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    frames.set_grid(0.0, 1.0)
    t = np.arange(1, 3001) * 100_000  # an item every 0.1 ms for 0.3 s
    rec = _records(Kind.PUT, pid, t)
    frames.add(rec[t < 150_000_000])
    out = frames.close_until(150_000_000)
    frames.set_grid(40_000.0, 1.0)
    frames.add(rec[t >= 150_000_000])
    out += frames.finish(300_000_001)
    counts = [r.point("sum").value for r in _frames(out)]
    assert sum(counts) == 3000  # type: ignore[arg-type]
    assert frames.ledger.late == 0


def test_a_host_keeps_the_records_it_reduces_and_ships_what_the_monitor_reads() -> None:
    plan, topo = _prepared()
    pairs = host_pairs(plan, topo, trace=False)["node-b"]
    shipped = shipped_probes(plan, topo, trace=False)
    local = LocalReduction((), 1.0, None, (), HostFrames(pairs, topo.probes, {}), shipped)
    local.host_frames.set_grid(0.0, 1.0)  # type: ignore[union-attr]
    local._has_grid = True
    parts = [_records(Kind.GET if p.kind == "head" else Kind.PUT, p.id, np.arange(1, 11) * 1000)
             for p in topo.probes if p.kind in ("tail", "head")
             and (p.kind, p.target) != ("tail", "src -> mid")]  # node-b's taps  # fmt: skip
    sent, _ = local.take(np.concatenate(parts), 0)
    crossing = {(p.kind, p.target) for p in topo.probes if p.id in set(sent["probe"].tolist())}
    # The link's head end goes out (the monitor pairs it with the tail's for latency), though
    # node-b counts its throughput too; the channel inside node-b stays.
    assert crossing == {("head", "src -> mid")}
    inside = {p.id for p in topo.probes if p.target == "mid -> dst" and p.kind in ("tail", "head")}
    assert local.kept_by_probe == dict.fromkeys(inside, 10)


def test_shipped_frames_cross_whole_or_are_refused() -> None:
    r = FrameResult(3, "a -> b", 2, 200, 300, 100, (ScalarPoint("mean", 1.5),))
    payload = encode_frames([ShippedFrame(r, 12.5, 20.0)])
    (back,) = decode_frames(payload)
    assert back == ShippedFrame(r, 12.5, 20.0)
    for bad in (payload[:5], b"XXXX" + payload[4:], payload[:-3]):
        with pytest.raises(ShippedFrameError):
            decode_frames(bad)


def test_the_monitor_bounds_a_host_s_frames_by_its_fit_and_fills_what_never_came() -> None:
    """Frames closed on node-b (its clock 40 ppm fast, 3 s ahead, not told): each gets the
    distance of its edges, mapped by the monitor's fit of that clock, from their virtual times
    (a frame whose edges the host placed 1 ms off is bounded by that much); frames the host
    never sent before the run's end are there, with nothing covered."""
    from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo
    from streamscope.monitor.engine import Engine
    from streamscope.query.compile import compile_queries
    from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
    from streamscope.transport.wire import EXCHANGE_DTYPE, Message, MsgType

    t0 = 5_000_000_000
    clock = EmulatedClock(EmulatedClockSpec(rate_ppm=40, offset_s=3), t0 - 10**8)
    topo = Topology(
        "h",
        resources=(ResourceInfo("main", "thread"), ResourceInfo("node-b", "host", "node-b")),
        stages=(StageInfo("a", "node-b", "source"), StageInfo("b", "node-b", "sink")),
        channels=(ChannelInfo("a -> b", "a", "b", 8),),
        probes=(ProbeInfo(1, "tail", "a -> b", "node-b"), ProbeInfo(2, "head", "a -> b", "node-b")),
    )
    plan = compile_queries(["count(a -> b) every 100ms"], topo, FRAME)
    assert plan.monitor_measured(topo, trace=False) == []
    out: list[FrameResult] = []
    eng = Engine(plan, topo, FRAME, lambda r, d: out.extend(r))
    empty = make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))

    def msg(kind: MsgType, agent: int, wm: int, **kw: object) -> Message:
        return Message(kind, agent, 0, wm, kw.get("records", empty), {}, kw.get("payload", b""))  # type: ignore[arg-type]

    eng.handle(msg(MsgType.START, 0, t0))
    eng.handle(Message(MsgType.HELLO, 1, 0, t0, empty, {"domain": "node-b", "data": True}))
    for at in (0, 300_000_000):
        rows = np.zeros(40, dtype=EXCHANGE_DTYPE)
        for i in range(40):
            t = t0 + at + i * 20_000
            rows[i] = (t, int(clock.ticks_at(np.array([t + 5_000]))[0]), t + 10_000)
        eng.handle(msg(MsgType.CALIBRATION, 1, 0, records=rows))

    def ticks(v: int) -> float:
        return float(clock.ticks_at(np.array([t0 + v]))[0])

    sent = [
        ShippedFrame(FrameResult(0, "a -> b", k, k * FRAME, (k + 1) * FRAME, FRAME,
                                 (ScalarPoint("sum", 5.0),)),
                     ticks(k * FRAME) + off, ticks((k + 1) * FRAME) + off)
        for k, off in ((0, 0.0), (1, 1_000_000.0))
    ]  # fmt: skip
    eng.handle(msg(MsgType.SUMMARY, 1, int(ticks(FRAME)), payload=encode_frames(sent)))
    eng.handle(msg(MsgType.END, 1, int(ticks(2 * FRAME))))
    eng.finish(4 * FRAME - FRAME // 2)
    by = {r.frame: r for r in out}
    assert sorted(by) == [0, 1, 2, 3]
    unc = [by[k].point("uncertainty_ns").value for k in (0, 1)]
    assert unc[0] < 50_000  # the fit's own bounds: tens of µs here
    assert 1_000_000 <= unc[1] < 1_050_000  # type: ignore[operator]
    assert [by[k].point("sum").value for k in (0, 1)] == [5.0, 5.0]
    assert [by[k].covered_ns for k in (2, 3)] == [0, 0]
