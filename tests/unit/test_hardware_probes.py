"""Hardware-style probes: trigger depth, wrapping counters and timers, samplers, global trigger."""

from __future__ import annotations

import pytest

from streamscope.core.records import Kind
from streamscope.probes.hardware import (
    Condition,
    CountAction,
    Counter,
    GlobalTrigger,
    IntervalTimer,
    Periodic,
    SampleAction,
    Sampler,
    StartTimer,
    StopTimer,
    TraceAction,
    Trigger,
)
from streamscope.probes.taps import RingTap


def feed(trigger: Trigger, values: list[int], t0: int = 0) -> list[int]:
    """Ticks at which the trigger fired (value i observed at ticks t0 + i)."""
    return [t0 + i for i, v in enumerate(values) if trigger.observe(t0 + i, v)]


@pytest.mark.parametrize(
    ("op", "value", "mask", "x", "expected"),
    [
        ("==", 3, -1, 3, True),
        ("==", 3, -1, 4, False),
        ("!=", 3, -1, 4, True),
        ("<", 3, -1, 2, True),
        ("<=", 3, -1, 3, True),
        (">", 3, -1, 3, False),
        (">=", 3, -1, 3, True),
        ("==", 0x5, 0x0F, 0xA5, True),
        ("==", 0x5, 0x0F, 0xA6, False),
        (">", 0x10, 0xF0, 0x1F, False),
        (">", 0x10, 0xF0, 0x2F, True),
    ],
)
def test_condition_masks_then_compares(
    op: str, value: int, mask: int, x: int, expected: bool
) -> None:
    assert Condition(op, value, mask).matches(x) is expected


def test_condition_rejects_unknown_operator() -> None:
    with pytest.raises(ValueError, match="unknown comparison"):
        Condition("=<", 1)


def test_depth_three_matches_in_order_ignoring_noise() -> None:
    counter = Counter()
    trig = Trigger(
        [Condition("==", 1), Condition("==", 2), Condition("==", 3)], [CountAction(counter)]
    )
    assert trig.depth == 3
    #          0  1  2  3  4  5  6  7  8  9 10 11 12
    values = [9, 1, 7, 2, 2, 8, 3, 3, 1, 2, 0, 3, 3]
    assert feed(trig, values) == [6, 11]
    assert trig.fired == 2
    assert counter.total == 2
    assert trig.level == 0


def test_out_of_order_does_not_fire() -> None:
    trig = Trigger([Condition("==", 1), Condition("==", 2), Condition("==", 3)])
    assert feed(trig, [3, 2, 1]) == []
    assert trig.level == 1  # only the 1 advanced it


def test_reset_on_mismatch_requires_consecutive_matches() -> None:
    conds = [Condition("==", 1), Condition("==", 2), Condition("==", 3)]
    values = [1, 2, 9, 3, 1, 2, 3, 1, 1, 2, 3]
    lax = Trigger(conds)
    strict = Trigger(conds, reset_on_mismatch=True)
    assert feed(lax, values) == [3, 6, 10]
    # 1,2,9 resets; 1,2,3 fires at 6; 1 then 1 (mismatch, but it restarts level 1) 2 3 fires at 10.
    assert feed(strict, values) == [6, 10]


def test_reset_on_mismatch_retries_value_against_first_condition() -> None:
    trig = Trigger([Condition("==", 1), Condition("==", 2)], reset_on_mismatch=True)
    trig.observe(0, 1)
    trig.observe(1, 1)  # mismatch at level 1, but matches level 0 again
    assert trig.level == 1
    assert trig.observe(2, 2)


def test_masked_trigger_on_flag_bits() -> None:
    # Fire when bit 3 rises then the low nibble is zero.
    trig = Trigger([Condition("==", 0x8, mask=0x8), Condition("==", 0, mask=0xF)])
    # 0x07: bit 3 clear; 0x18 arms; 0x11 ignored; 0xF0 fires; 0x0F re-arms; 0x00 fires again.
    assert feed(trig, [0x07, 0x18, 0x11, 0xF0, 0x0F, 0x00]) == [3, 5]


def test_trigger_needs_a_condition() -> None:
    with pytest.raises(ValueError, match="at least one"):
        Trigger([])


def test_counter_wraps_at_small_width() -> None:
    c = Counter(width=4)
    for _ in range(35):
        c.increment()
    assert (c.value, c.wraps, c.total) == (3, 2, 35)
    c.increment(16 * 3 + 1)
    assert (c.value, c.wraps, c.total) == (4, 5, 35 + 49)
    with pytest.raises(ValueError, match="counts up"):
        c.increment(-1)


def test_interval_timer_wraps_and_counts_unmatched_stops() -> None:
    t = IntervalTimer(width=3)  # wraps at 8
    t.stop(5)  # no start: ignored
    assert (t.unmatched, t.intervals, t.total) == (1, 0, 0)
    t.start(10)
    t.stop(15)  # 5
    t.start(20)
    t.stop(26)  # 6 -> 11 = 1 wrap + 3
    assert (t.intervals, t.value, t.wraps, t.total) == (2, 3, 1, 11)
    t.stop(30)  # already stopped
    assert t.unmatched == 2
    t.start(40)
    t.start(42)  # re-arm
    t.stop(50)  # 8 -> 19 = 2 wraps + 3
    assert (t.restarts, t.intervals, t.value, t.wraps, t.total) == (1, 3, 3, 2, 19)
    t.start(60)
    with pytest.raises(ValueError, match="before its start"):
        t.stop(59)


def test_timer_driven_by_triggers() -> None:
    timer = IntervalTimer(width=8)
    start = Trigger([Condition("==", 1)], [StartTimer(timer)])
    stop = Trigger([Condition("==", 2)], [StopTimer(timer)])
    for ticks, v in enumerate([2, 0, 1, 0, 0, 2, 1, 2]):
        start.observe(ticks, v)
        stop.observe(ticks, v)
    assert (timer.unmatched, timer.intervals, timer.total) == (1, 2, 3 + 1)


def test_sampler_on_trigger_records_sample_kind() -> None:
    tap = RingTap(4, Kind.SAMPLE, capacity=8)
    s = Sampler(tap)
    trig = Trigger([Condition(">", 100)], [SampleAction(s, lambda v: v * 2), SampleAction(s)])
    feed(trig, [5, 150, 7, 300], t0=1000)
    rec, dropped = tap.drain()
    assert dropped == 0
    assert rec["kind"].tolist() == [int(Kind.SAMPLE)] * 4
    assert rec["ticks"].tolist() == [1001, 1001, 1003, 1003]
    assert rec["value"].tolist() == [300, 150, 600, 300]
    assert s.captures == 4
    with pytest.raises(ValueError, match=r"Kind\.SAMPLE"):
        Sampler(RingTap(1, Kind.COUNT, capacity=4))


def test_periodic_captures_at_each_period_boundary() -> None:
    tap = RingTap(1, Kind.SAMPLE, capacity=16)
    p = Periodic(Sampler(tap), period_ticks=10)
    captured = [t for t in range(36) if p.tick(t, t * 100)]
    assert captured == [10, 20, 30]
    assert p.missed == 0
    rec, _ = tap.drain()
    assert rec["ticks"].tolist() == [10, 20, 30]
    assert rec["value"].tolist() == [1000, 2000, 3000]


def test_periodic_catch_up_counts_missed_periods() -> None:
    tap = RingTap(1, Kind.SAMPLE, capacity=16)
    p = Periodic(Sampler(tap), period_ticks=10, start_ticks=5)
    assert not p.tick(14, 1)
    assert p.tick(15, 2)  # due at 15
    assert p.tick(57, 3)  # 25, 35, 45, 55 passed: one capture, three missed
    assert p.missed == 3
    assert not p.tick(64, 4)
    assert p.tick(65, 5)
    assert p.captures == 3
    rec, _ = tap.drain()
    assert rec["ticks"].tolist() == [15, 57, 65]
    assert rec["value"].tolist() == [2, 3, 5]
    with pytest.raises(ValueError, match="positive"):
        Periodic(Sampler(tap), 0)


def test_global_trigger_snapshots_every_member_at_identical_ticks() -> None:
    c_tap = RingTap(1, Kind.SAMPLE, capacity=4)
    t_tap = RingTap(2, Kind.SAMPLE, capacity=4)
    s_tap = RingTap(3, Kind.SAMPLE, capacity=4)
    counter = Counter(width=4, tap=c_tap)
    timer = IntervalTimer(width=4, tap=t_tap)
    sampler = Sampler(s_tap)
    for _ in range(20):
        counter.increment()
    timer.start(0)
    timer.stop(18)
    sampler.hold(77)
    g = GlobalTrigger([counter, timer, sampler])
    # The global trigger fires when any probe sees the mask match.
    trig = Trigger([Condition("==", 0x80, mask=0x80)], [g])
    feed(trig, [1, 2, 0x81], t0=500)
    assert g.fires == 1
    out = [tap.drain() for tap in (c_tap, t_tap, s_tap)]
    assert [d for _, d in out] == [0, 0, 0]
    assert [len(r) for r, _ in out] == [1, 1, 1]
    assert [int(r["ticks"][0]) for r, _ in out] == [502, 502, 502]
    assert [int(r["value"][0]) for r, _ in out] == [20, 18, 77]
    assert [int(r["probe"][0]) for r, _ in out] == [1, 2, 3]
    with pytest.raises(ValueError, match="no tap"):
        GlobalTrigger([Counter()])


def test_trace_action_kind_and_drops() -> None:
    tap = RingTap(9, Kind.COUNT, capacity=2)
    trig = Trigger([Condition("!=", 0)], [TraceAction(tap, Kind.COUNT)])
    feed(trig, [1, 0, 2, 3, 0, 4])
    rec, dropped = tap.drain()
    assert rec["kind"].tolist() == [int(Kind.COUNT)] * 2
    assert rec["value"].tolist() == [1, 2]
    assert dropped == 2
    with pytest.raises(ValueError, match="does not match"):
        TraceAction(tap)
