"""Provisional frames: what waits for a clock's next calibration, shown live, never stored."""

from __future__ import annotations

import numpy as np

from streamscope.aggregate.points import DropCount, FrameResult, QuantilesPoint
from streamscope.core.records import Kind, make_records
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.monitor.engine import Engine
from streamscope.query.compile import compile_queries
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.transport.wire import EXCHANGE_DTYPE, Message, MsgType

FRAME_NS = 100_000_000
T0 = 5_000_000_000
QUERY = "latency(src -> work): p50 every 100ms"
TOPOLOGY = Topology(
    "prov",
    resources=(ResourceInfo("main", "thread"), ResourceInfo("dev", "process", "dev")),
    stages=(StageInfo("src", "main", "source"), StageInfo("work", "dev", "sink")),
    channels=(ChannelInfo("src -> work", "src", "work", 64),),
    probes=(ProbeInfo(1, "tail", "src -> work"), ProbeInfo(2, "head", "src -> work", "dev")),
)
CLOCK = EmulatedClock(EmulatedClockSpec(rate_ppm=40, offset_s=3, tick_ns=5), T0 - 10**8)
LATENCY_NS = 200_000


def _msg(kind: MsgType, agent: int, wm: int, records=None, info=None) -> Message:  # type: ignore[no-untyped-def]
    if records is None:
        records = make_records(0, 0, np.zeros(0, np.int64), np.zeros(0, np.int64))
    return Message(kind, agent, 0, wm, records, dict(info or {}))


def _burst(at: int, clock: EmulatedClock = CLOCK) -> np.ndarray:
    rows = np.zeros(40, dtype=EXCHANGE_DTYPE)
    for i in range(40):
        t = at + i * 20_000
        rows[i] = (t, int(clock.ticks_at(np.array([t + 5_000]))[0]), t + 10_000)
    return rows


def _feed(eng: Engine, upto_ns: int, seq0: int) -> int:
    """Items every ms from seq0's time to ``upto_ns`` (virtual), removed LATENCY_NS later."""
    ins = T0 + np.arange(seq0, upto_ns // 1_000_000, dtype=np.int64) * 1_000_000 + 500_000
    seq = np.arange(seq0 + 1, seq0 + 1 + len(ins), dtype=np.int64)
    ticks = CLOCK.ticks_at(ins + LATENCY_NS)
    eng.handle(_msg(MsgType.BATCH, 0, T0 + upto_ns, make_records(int(Kind.PUT), 1, ins, seq)))
    eng.handle(_msg(MsgType.BATCH, 1, int(ticks[-1]), make_records(int(Kind.GET), 2, ticks, seq)))
    return seq0 + len(ins)


def _engine() -> tuple[Engine, list[FrameResult]]:
    out: list[FrameResult] = []

    def sink(frames: list[FrameResult], drops: list[DropCount]) -> None:
        out.extend(frames)

    plan = compile_queries([QUERY], TOPOLOGY, FRAME_NS).sited(TOPOLOGY, trace=False)
    eng = Engine(plan, TOPOLOGY, FRAME_NS, sink)
    eng.handle(_msg(MsgType.START, 0, T0))
    eng.handle(_msg(MsgType.HELLO, 0, T0, info={"domain": "host"}))
    eng.handle(_msg(MsgType.HELLO, 1, T0, info={"domain": "dev"}))
    for at in (0, 200_000_000, 400_000_000):  # a record is final once two later bursts came
        eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + at)))
    return eng, out


def _p50(fr: FrameResult) -> float:
    (q,) = [p for p in fr.points if isinstance(p, QuantilesPoint)]
    return float(q.values[0])


def test_frames_past_the_last_burst_are_shown_provisional_and_final_later() -> None:
    eng, final = _engine()
    seq = _feed(eng, 550_000_000, 0)
    eng.advance()
    # Final only up to what two bursts bracket (200 ms); the rest waits for the next burst.
    done = {fr.frame for fr in final}
    assert done == {0, 1}
    prov = eng.provisional()
    assert prov and all(fr.provisional for fr in prov)
    assert {fr.frame for fr in prov} == set(range(max(done) + 1, 5))
    for fr in prov:  # extrapolated, yet right here (no step), within its own bounds
        unc = float(next(p.value for p in fr.points if p.stat == "uncertainty_ns") or 0.0)
        assert abs(_p50(fr) - LATENCY_NS) <= unc + 10
    # Nothing provisional reached the sink, and the engine goes on as if never asked.
    assert all(not fr.provisional for fr in final)
    n_before = len(final)
    eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + 600_000_000)))
    eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + 800_000_000)))
    _feed(eng, 700_000_000, seq)
    eng.advance()
    later = {fr.frame: fr for fr in final[n_before:]}
    for fr in prov:
        assert fr.frame in later and not later[fr.frame].provisional
        assert abs(_p50(later[fr.frame]) - LATENCY_NS) <= 10


def test_asking_for_provisional_frames_changes_nothing_final() -> None:
    results = []
    for ask in (False, True):
        eng, final = _engine()
        seq = _feed(eng, 350_000_000, 0)
        eng.advance()
        if ask:
            assert eng.provisional()
        eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + 600_000_000)))
        _feed(eng, 600_000_000, seq)
        eng.finish(600_000_000)
        results.append([(fr.frame, fr.points) for fr in final])
    assert results[0] == results[1]


def test_nothing_is_provisional_when_nothing_waits() -> None:
    eng, final = _engine()
    _feed(eng, 150_000_000, 0)
    eng.advance()
    assert final and eng.provisional() == []


def test_an_agent_s_watermark_past_its_clock_s_bracket_closes_nothing_past_it() -> None:
    """A device agent may promise a watermark past its clock's bracket while it holds nothing
    there. Where the clock's rate changes after the bracket, the fit of the bursts so far places
    that tick later than the truth, and a record sent next at that very tick, placed by the
    refined fit, would land before it: late. Counted from the bracket, the watermark closes
    nothing there; every record is on time."""
    clock = EmulatedClock(
        EmulatedClockSpec(rate_ppm=40, offset_s=3, tick_ns=5, rate_step_at_s=0.55,
                          rate_step_ppm=2000),
        T0 - 10**8,
    )  # fmt: skip

    out: list[FrameResult] = []
    eng = Engine(compile_queries([QUERY], TOPOLOGY, FRAME_NS).sited(TOPOLOGY, trace=False), TOPOLOGY, FRAME_NS,
                 lambda frames, drops: out.extend(frames))  # fmt: skip
    eng.handle(_msg(MsgType.START, 0, T0))
    eng.handle(_msg(MsgType.HELLO, 0, T0, info={"domain": "host"}))
    eng.handle(_msg(MsgType.HELLO, 1, T0, info={"domain": "dev"}))
    for at in (0, 200_000_000, 400_000_000):
        eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + at, clock)))
    ins = T0 + np.arange(900, dtype=np.int64) * 1_000_000 + 500_000
    seq = np.arange(1, 901, dtype=np.int64)
    # The consumer takes items 200 us after they come until 150 ms, then stalls until 800 ms
    # and takes the rest back to back.
    out_ns = np.where(ins < T0 + 150_000_000, ins + LATENCY_NS, 0)
    late_ones = out_ns == 0
    out_ns[late_ones] = T0 + 800_000_000 + np.arange(int(late_ones.sum())) * 50_000
    rem = clock.ticks_at(out_ns)
    eng.handle(_msg(MsgType.BATCH, 0, T0 + 900_000_000, make_records(int(Kind.PUT), 1, ins, seq)))
    # The device sends what it removed before the stall and promises its next removal's tick.
    eng.handle(_msg(MsgType.BATCH, 1, int(rem[late_ones][0]),
                    make_records(int(Kind.GET), 2, rem[~late_ones], seq[~late_ones])))  # fmt: skip
    eng.advance()
    for at in (600_000_000, 800_000_000, 1_000_000_000, 1_200_000_000):
        eng.handle(_msg(MsgType.CALIBRATION, 1, 0, _burst(T0 + at, clock)))
    eng.handle(_msg(MsgType.BATCH, 1, int(rem[-1]),
                    make_records(int(Kind.GET), 2, rem[late_ones], seq[late_ones])))  # fmt: skip
    eng.finish(1_000_000_000)
    assert eng.ledger.late == 0
