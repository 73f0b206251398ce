"""A cluster host's own frames: which (query, target) pairs a host reduces, the frames it closes
on the run's grid placed on its clock against figures computed here from the same items, and
their way to the monitor."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import streamscope as ss
from streamscope.agents.device import LocalReduction
from streamscope.agents.host import HostFrames
from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.aggregate.shipped import (
    ShippedFrame,
    ShippedFrameError,
    decode_frames,
    encode_frames,
)
from streamscope.core.records import Kind, Records, make_records
from streamscope.core.topology import Topology
from streamscope.query.plan import Plan
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


def _prepared(
    queries: list[str] = QUERIES, trace: bool = False, device_trace: bool = False
) -> tuple[Plan, Topology]:
    return prepare(_pipeline(), queries, FRAME, trace=trace, device_trace=device_trace)


def _pairs(plan: Plan) -> set[tuple[str, str, str]]:
    return {(host, q.metric, t.name) for host, pairs in plan.host_reduced.items()
            for q, t in pairs}  # fmt: skip


def test_a_host_reduces_what_its_own_taps_measure_and_the_monitor_the_rest() -> None:
    plan, topo = _prepared()
    assert _pairs(plan) == {
        # a link's tail end on the producer's host, its head end on the consumer's
        ("node-a", "count", "src -> mid"),
        ("node-b", "throughput", "src -> mid"),
        # the latency of a link into a host, there: its items bring their insertion ticks
        ("node-b", "latency", "src -> mid"),
        # the channel inside node-b: everything, its latency too (one clock)
        ("node-b", "count", "mid -> dst"),
        ("node-b", "throughput", "mid -> dst"),
        ("node-b", "occupancy", "mid -> dst"),
        ("node-b", "latency", "mid -> dst"),
        ("node-b", "iteration", "dst"),
    }
    # Nothing is left for the monitor to reduce from records: no host sends one.
    assert plan.monitor_measured == []
    assert shipped_probes(plan, topo) == frozenset()
    # But what it reads: a link's records kept whole (raw), a state no host reduces.
    states = ["state(*) every 100ms", "state(mid) every 200ms", "count(src -> mid) every 100ms"]
    plan2, _ = _prepared(states)
    # (mid's states on two frames: its host reduces them on frames of 100 ms, which make up
    # both.)
    assert plan2.summarized_states == dict.fromkeys(("src", "mid", "dst"), FRAME)
    assert plan2.sites is not None and plan2.sites.raw_links == frozenset()
    plan3, topo3 = _prepared(states, device_trace=True)  # every link's records cross raw
    assert plan3.sites is not None and plan3.sites.raw_links is None
    shipped = shipped_probes(plan3, topo3)
    assert shipped is not None
    assert {(p.kind, p.target) for p in topo3.probes if p.id in shipped} == {
        (end, "src -> mid") for end in ("tail", "send", "deliver", "head")
    }
    # Keeping every record (a trace): nothing is reduced away from the monitor.
    traced, topo4 = _prepared(trace=True)
    assert shipped_probes(traced, topo4) is None
    assert _pairs(traced) == set()
    assert host_pairs(traced) == {}


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
    pairs = host_pairs(plan)["node-b"]
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
    (pairs,) = host_pairs(plan).values()
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


@pytest.mark.parametrize(("rate", "seed"), [(1.02, 1), (0.98, 2), (1.02, 3), (0.98, 4)])
def test_a_better_grid_mid_run_keeps_every_frame_s_occupancy(rate: float, seed: int) -> None:
    """The first grid has the clock's rate 2 % off (one burst fixes it poorly); a better one
    comes mid-run, when the first has placed the clock's ticks 3 ms off. Each frame's
    time-weighted occupancy is still the items' own over the ticks its shipped edges span,
    within what the two rates allow: the map slews to the new grid from the last tick placed
    rather than jumping (a jump made the items put by one grid and taken by the other stay
    3 ms more or less, and the frame's edges, by the new grid, miss what the old placed)."""
    plan, topo = _prepared(["occupancy(mid -> dst): mean every 100ms"])
    pairs = host_pairs(plan)["node-b"]
    probe = {(p.kind, p.target): p.id for p in topo.probes}
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    t_in, t_out = _channel_case(seed)  # in ticks
    tail = _records(Kind.PUT, probe[("tail", "mid -> dst")], t_in)
    head = _records(Kind.GET, probe[("head", "mid -> dst")], t_out)
    frames.set_grid(0.0, rate)
    out: list[bytes] = []
    cut = 150_000_000  # ticks: 3 ms off by then
    frames.add(np.concatenate((tail[t_in < cut], head[t_out < cut])))
    frames.set_grid(0.0, 1.0)
    frames.add(np.concatenate((tail[t_in >= cut], head[t_out >= cut])))
    end = int(t_out[-1]) + 1
    out += frames.finish(end)
    shipped = [f for p in out for f in decode_frames(p)]
    assert len(shipped) >= 5
    for f in shipped:
        lo, hi = f.lo_ticks, min(f.hi_ticks, end)  # (the last frame ends with the run)
        # The level over [lo, hi) in ticks, exactly: each item's stay inside it.
        held = np.clip(np.minimum(t_out, hi) - np.maximum(t_in, lo), 0, None).sum()
        mean = f.result.point("mean").value  # type: ignore[union-attr]
        # The most the channel held in the frame: the first grid's rate (2 % off) weighs the
        # part of the frame before the change 2 % apart from the part after, and the slewing
        # stretch 1 %: the frame's mean may be off by 3 % of its range of levels at most.
        times = np.concatenate((t_in, t_out))
        steps = np.concatenate((np.ones(len(t_in)), -np.ones(len(t_out))))[np.argsort(times)]
        level = np.cumsum(steps)[np.sort(times) < hi]
        top = max(level[np.sort(times)[: len(level)] >= lo].max(initial=0), level[-1])
        assert mean == pytest.approx(held / (hi - lo), abs=0.03 * top), (f.result.frame, lo, hi)


def test_a_host_keeps_the_records_it_reduces_and_ships_what_the_monitor_reads() -> None:
    plan, topo = _prepared()
    pairs = host_pairs(plan)["node-b"]
    # The monitor reads the link's head itself (say, a query of its own on it).
    shipped = frozenset(p.id for p in topo.probes if (p.kind, p.target) == ("head", "src -> mid"))
    local = LocalReduction((), 1.0, None, (), HostFrames(pairs, topo.probes, {}), shipped)
    local.host_frames.set_grid(0.0, 1.0)  # type: ignore[union-attr]
    local._has_grid = True
    parts = [_records(Kind.GET if p.kind == "head" else Kind.PUT, p.id, np.arange(1, 11) * 1000)
             for p in topo.probes if p.kind in ("tail", "head")
             and (p.kind, p.target) != ("tail", "src -> mid")]  # node-b's taps  # fmt: skip
    sent, _ = local.reduce(np.concatenate(parts), 0)
    crossing = {(p.kind, p.target) for p in topo.probes if p.id in set(sent["probe"].tolist())}
    # The link's head end goes out (the monitor reads it), though node-b reduces its
    # throughput and latency too; everything else stays on node-b.
    assert crossing == {("head", "src -> mid")}
    inside = {p.id for p in topo.probes if p.kind in ("tail", "head")} - shipped
    inside -= {p.id for p in topo.probes if (p.kind, p.target) == ("tail", "src -> mid")}
    assert local.kept_by_probe == dict.fromkeys(inside, 10)


def test_shipped_frames_cross_whole_or_are_refused() -> None:
    r = FrameResult(3, "a -> b", 2, 200, 300, 100, (ScalarPoint("mean", 1.5),))
    payload = encode_frames([ShippedFrame(r, 12.5, 20.0, None, 3.0)])
    (back,) = decode_frames(payload)
    assert back == ShippedFrame(r, 12.5, 20.0, None, 3.0)
    for bad in (payload[:5], b"XXXX" + payload[4:], payload[:-3]):
        with pytest.raises(ShippedFrameError):
            decode_frames(bad)


T0 = 5_000_000_000
CLOCKS = {"node-a": "rate_ppm=-25,offset_s=-2", "node-b": "rate_ppm=40,offset_s=3"}


def _monitor(channel: str, query: str) -> tuple[Any, list[FrameResult], Any]:
    """An engine for stages ``a`` on node-a and ``b`` on node-b (or both on node-b, for
    ``"a -> b"`` inside one host), each host's clock calibrated by two bursts; the clocks."""
    from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo
    from streamscope.monitor.engine import Engine
    from streamscope.query.compile import compile_queries
    from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
    from streamscope.transport.wire import EXCHANGE_DTYPE, Message, MsgType

    link = channel == "link"
    a_on = "node-a" if link else "node-b"
    topo = Topology(
        "h",
        resources=(ResourceInfo("main", "thread"), ResourceInfo("node-a", "host", "node-a"),
                   ResourceInfo("node-b", "host", "node-b")),
        stages=(StageInfo("a", a_on, "source"), StageInfo("b", "node-b", "sink")),
        channels=(ChannelInfo("a -> b", "a", "b", 8, "link" if link else "thread"),),
        probes=(ProbeInfo(1, "tail", "a -> b", a_on), ProbeInfo(2, "head", "a -> b", "node-b")),
    )  # fmt: skip
    plan = compile_queries([query], topo, FRAME).sited(topo, trace=False)
    assert plan.monitor_measured == []
    out: list[FrameResult] = []
    eng = Engine(plan, topo, FRAME, lambda r, d: out.extend(r))
    empty = make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    eng.handle(Message(MsgType.START, 0, 0, T0, empty, {}))
    clocks = {}
    for agent, (name, spec) in enumerate(CLOCKS.items(), start=1):
        clock = clocks[name] = EmulatedClock(EmulatedClockSpec.parse(spec), T0 - 10**8)
        eng.handle(Message(MsgType.HELLO, agent, 0, T0, empty, {"domain": name, "data": True}))
        for at in (0, 300_000_000):
            rows = np.zeros(40, dtype=EXCHANGE_DTYPE)
            for i in range(40):
                t = T0 + at + i * 20_000
                rows[i] = (t, int(clock.ticks_at(np.array([t + 5_000]))[0]), t + 10_000)
            eng.handle(Message(MsgType.CALIBRATION, agent, 0, 0, rows, {}))
    return eng, out, clocks


def _ticks(clock: Any, v: float) -> float:
    return float(clock.ticks_at(np.array([T0 + int(v)]))[0])


def _send(eng: Any, frames: list[ShippedFrame], end_ticks: float) -> None:
    from streamscope.transport.wire import Message, MsgType

    empty = make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    eng.handle(Message(MsgType.SUMMARY, 2, 0, 0, empty, {}, encode_frames(frames)))
    eng.handle(Message(MsgType.END, 2, 0, int(end_ticks), empty, {}))
    eng.handle(Message(MsgType.END, 1, 0, 0, empty, {}))


def _frame(k: int, stat: str, value: float) -> FrameResult:
    return FrameResult(
        0, "a -> b", k, k * FRAME, (k + 1) * FRAME, FRAME, (ScalarPoint(stat, value),)
    )


def test_the_monitor_bounds_a_host_s_frames_by_its_fit_and_fills_what_never_came() -> None:
    """Frames closed on node-b (its clock 40 ppm fast, 3 s ahead, not told): each gets the
    distance of its edges, mapped by the monitor's fit of that clock, from their virtual times
    (a frame whose edges the host placed 1 ms off is bounded by that much, one whose records
    an earlier grid placed up to 0.5 ms outside its edges by that); frames the host never sent
    before the run's end are there, with nothing covered."""
    eng, out, clocks = _monitor("inside", "count(a -> b) every 100ms")
    b = clocks["node-b"]
    sent = [ShippedFrame(_frame(k, "sum", 5.0), _ticks(b, k * FRAME) + off,
                         _ticks(b, (k + 1) * FRAME) + off, None, slack)
            for k, off, slack in ((0, 0.0, 0.0), (1, 1_000_000.0, 0.0),
                                  (2, 0.0, 500_000.0))]  # fmt: skip
    _send(eng, sent, _ticks(b, 3 * FRAME))
    eng.finish(5 * FRAME - FRAME // 2)
    by = {r.frame: r for r in out}
    assert sorted(by) == [0, 1, 2, 3, 4]
    unc = [by[k].point("uncertainty_ns").value for k in (0, 1, 2)]
    assert unc[0] < 50_000  # the fit's own bounds: tens of µs here
    assert 1_000_000 <= unc[1] < 1_050_000  # type: ignore[operator]
    assert 500_000 <= unc[2] < 550_000  # type: ignore[operator]
    assert [by[k].point("sum").value for k in (0, 1, 2)] == [5.0, 5.0, 5.0]
    assert [by[k].covered_ns for k in (3, 4)] == [0, 0]


def test_a_link_s_latency_is_bounded_by_both_clocks_fits() -> None:
    """A frame of the link's latency closed on node-b: its bounds add how far node-b's grid of
    node-a's clock placed the items' insertions from the monitor's fit of node-a (2 ms off in
    the second frame), and the size of any negative latency it counted 0."""
    from streamscope.aggregate.shipped import Stamped

    eng, out, clocks = _monitor("link", "latency(a -> b): mean every 100ms")
    a, b = clocks["node-a"], clocks["node-b"]
    sent = []
    for k, off, slack in ((0, 0.0, 0.0), (1, 2_000_000.0, 0.0), (2, 0.0, 300_000.0)):
        lo, hi = k * FRAME + 1_000_000, k * FRAME + 90_000_000
        st = Stamped("node-a", _ticks(a, lo), _ticks(a, hi), lo + off, hi + off,
                     1 if slack else 0, slack)  # fmt: skip
        sent.append(ShippedFrame(_frame(k, "mean", 4e6), _ticks(b, k * FRAME),
                                 _ticks(b, (k + 1) * FRAME), st))  # fmt: skip
    _send(eng, sent, _ticks(b, 3 * FRAME))
    eng.finish(3 * FRAME)
    by = {r.frame: r for r in out}
    unc = [by[k].point("uncertainty_ns").value for k in range(3)]
    assert unc[0] < 100_000  # both fits' bounds
    assert 2_000_000 <= unc[1] < 2_100_000  # type: ignore[operator]
    assert 300_000 <= unc[2] < 400_000  # type: ignore[operator]
    assert [by[k].point("violations").value for k in range(3)] == [0.0, 0.0, 1.0]


def test_a_link_s_latency_is_paired_at_its_consumer_from_the_stamps_its_items_bring() -> None:
    """``src -> mid`` from node-a (1.5 ticks a ns from 3e9) into node-b (2.5 from 7e9): each
    batch brings its items' insertion ticks; node-b pairs them with its removals, by the
    producer's grid for the one and its own for the other — removals that come before the
    producer's grid wait for it. Each frame's mean latency is the items' own, and the frame
    says which of the producer's ticks it took (the monitor bounds them by its own fit)."""
    plan, topo = _prepared(["latency(src -> mid): mean every 100ms"])
    (pairs,) = host_pairs(plan).values()
    head = next(p.id for p in topo.probes if (p.kind, p.target) == ("head", "src -> mid"))
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    link = frames.stamps_for("src -> mid")
    assert link is not None and link.domain == "node-a"
    t_in, t_out = _channel_case(4)
    stamps = (3e9 + t_in * 1.5).astype(np.int64)
    frames.set_grid(7e9, 2.5)
    heads = _records(Kind.GET, head, 7e9 + t_out * 2.5)
    for first in range(0, len(t_in), 16):  # the batches, each before its items are got
        link.receive(first + 1, stamps[first : first + 16].tolist())
    frames.add(heads[:100])
    # Frame 0 closes before the producer's grid came: its removals waited, and are late
    # for it (a grid comes with the producer's first burst, before the run's clock starts).
    (closed,) = [
        f for p in frames.close_until(int(7e9 + 150_000_000 * 2.5)) for f in decode_frames(p)
    ]
    assert closed.result.frame == 0 and closed.stamped is None
    frames.set_remote_grid("node-a", 3e9, 1.5)
    frames.add(heads[100:])
    end = int(t_out[-1]) + 10
    shipped = [f for p in frames.finish(int(7e9 + end * 2.5)) for f in decode_frames(p)]
    got = {f.result.frame: f for f in shipped}
    lat = t_out - t_in
    checked = 0
    for k in range((end - 1) // FRAME + 1):
        here = (t_out >= k * FRAME) & (t_out < (k + 1) * FRAME)
        f = got.get(k)
        if k == 0 or not here.any():
            continue
        assert f is not None
        checked += 1
        assert f.result.point("mean").value == pytest.approx(lat[here].mean(), abs=2.0)
        assert f.stamped is not None
        assert (f.stamped.lo_ticks, f.stamped.hi_ticks) == (stamps[here].min(), stamps[here].max())
        assert f.stamped.lo_ns == pytest.approx(t_in[here].min(), abs=1.0)
        assert f.stamped.violations == 0
    assert checked >= 5 and link.unmatched == 0


def test_an_end_a_later_grid_places_sooner_loses_no_record() -> None:
    """The last records are mapped by one grid; a burst's grid that comes before the end moves
    the map back 40 µs, so the end lands before them: the last frame still holds them (the
    latency of every item, which no count of refused items could make up for)."""
    plan, topo = _prepared(["latency(mid -> dst): count every 100ms"])
    (pairs,) = host_pairs(plan).values()
    probe = {p.kind: p.id for p in topo.probes if p.target == "mid -> dst"}
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    frames.set_grid(0.0, 1.0)
    t = np.arange(1, 1001) * 150_000  # an item every 0.15 ms up to 150 ms, 20 µs in the channel
    frames.add(np.concatenate((_records(Kind.PUT, probe["tail"], t),
                               _records(Kind.GET, probe["head"], t + 20_000))))  # fmt: skip
    frames.set_grid(40_000.0, 1.0)
    out = frames.finish(int(t[-1]) + 30_000)  # 10 µs after the last: 30 µs before it now
    assert sum(r.point("count").value for r in _frames(out)) == 1000  # type: ignore[misc]


def test_records_an_earlier_grid_placed_keep_their_places_in_their_frames() -> None:
    """Items every 0.1 ms, 50 µs from every edge; a refined grid maps the host's clock 70 µs
    later just before the first frame's end, another 100 µs sooner in the middle of the third.
    Records placed already keep their places (the map slews from the last of them), so every
    frame's count is exactly the items inside the edges it ships, in the host's ticks, with no
    slack: nothing placed moved across an edge."""
    plan, topo = _prepared(["count(mid -> dst) every 100ms"])
    (pairs,) = host_pairs(plan).values()
    pid = next(p.id for p in topo.probes if p.kind == "tail")
    frames = HostFrames(pairs, topo.probes, topo.tick_periods())
    frames.set_grid(0.0, 1.0)
    ticks = np.arange(1, 4001) * 100_000 + 50_000  # within 50 µs of every edge
    rec = _records(Kind.PUT, pid, ticks)
    out: list[bytes] = []
    for lo, hi, grid in ((0, 99_990_000, None), (99_990_000, 250_000_000, (-70_000.0, 1.0)),
                         (250_000_000, 320_000_000, (30_000.0, 1.0))):  # fmt: skip
        if grid is not None:
            frames.set_grid(*grid)
        sel = (ticks >= lo) & (ticks < hi)
        frames.add(rec[sel])
        out += frames.close_until(hi)
    frames.add(rec[ticks >= 320_000_000])
    out += frames.finish(400_100_000)
    shipped = [f for p in out for f in decode_frames(p)]
    assert len(shipped) == 5
    assert sum(f.result.point("sum").value for f in shipped) == len(ticks)  # type: ignore[misc]
    for f in shipped:
        inside = int(((ticks >= f.lo_ticks) & (ticks < f.hi_ticks)).sum())
        assert f.result.point("sum").value == inside and f.slack_ns == 0.0, f.result.frame
