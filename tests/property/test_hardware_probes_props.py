"""Hardware probes against brute-force references, and exact accounting through small taps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.core.records import Kind
from streamscope.probes.hardware import (
    Condition,
    CountAction,
    Counter,
    GlobalTrigger,
    IntervalTimer,
    Periodic,
    Sampler,
    TraceAction,
    Trigger,
)
from streamscope.probes.taps import RingTap

OPS = ["==", "!=", "<", "<=", ">", ">="]
conditions = st.builds(
    Condition, st.sampled_from(OPS), st.integers(0, 7), st.sampled_from([-1, 0x3, 0x5, 0x6])
)


def ref_fires(conds: list[Condition], values: list[int], reset: bool) -> list[int]:
    """Indices at which the sequence completes, by direct restatement of the rules."""
    fires, level = [], 0
    for i, v in enumerate(values):
        if conds[level].matches(v):
            level += 1
        elif reset:
            level = 1 if conds[0].matches(v) else 0
        if level == len(conds):
            fires.append(i)
            level = 0
    return fires


@settings(max_examples=200, deadline=None)
@given(
    st.lists(conditions, min_size=1, max_size=4),
    st.lists(st.integers(0, 7), max_size=60),
    st.booleans(),
)
def test_trigger_matches_reference(conds: list[Condition], values: list[int], reset: bool) -> None:
    counter = Counter(width=2)
    trig = Trigger(conds, [CountAction(counter)], reset_on_mismatch=reset)
    got = [i for i, v in enumerate(values) if trig.observe(i, v)]
    assert got == ref_fires(conds, values, reset)
    assert counter.total == len(got) == trig.fired
    assert counter.value == len(got) % 4


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 12), st.lists(st.integers(0, 100), max_size=40))
def test_counter_total_is_exact(width: int, incs: list[int]) -> None:
    c = Counter(width)
    for n in incs:
        c.increment(n)
    assert c.total == sum(incs)
    assert c.value == sum(incs) % (1 << width)
    assert c.wraps == sum(incs) >> width


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 8), st.lists(st.tuples(st.booleans(), st.integers(0, 20)), max_size=50))
def test_timer_matches_reference(width: int, events: list[tuple[bool, int]]) -> None:
    timer = IntervalTimer(width)
    now, started, total, intervals, unmatched = 0, None, 0, 0, 0
    for is_start, dt in events:
        now += dt
        if is_start:
            timer.start(now)
            started = now
        else:
            timer.stop(now)
            if started is None:
                unmatched += 1
            else:
                total += now - started
                intervals += 1
                started = None
    assert (timer.total, timer.intervals, timer.unmatched) == (total, intervals, unmatched)
    assert timer.value == total % (1 << width)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 10), st.integers(-5, 5), st.lists(st.integers(0, 25), max_size=40))
def test_periodic_accounts_for_every_boundary(period: int, start: int, steps: list[int]) -> None:
    tap = RingTap(1, Kind.SAMPLE, capacity=64)
    p = Periodic(Sampler(tap), period, start_ticks=start)
    now = start
    for dt in steps:
        now += dt
        p.tick(now, now)
    boundaries = max(0, (now - start) // period)
    assert p.captures + p.missed == boundaries
    rec, dropped = tap.drain()
    assert dropped == 0
    assert len(rec) == p.captures
    assert p.next_due == start + (boundaries + 1) * period


# One step: observe a value, drain the taps, or fire the global trigger.
steps = st.lists(
    st.one_of(
        st.tuples(st.just("observe"), st.integers(0, 7)),
        st.tuples(st.just("drain"), st.just(0)),
        st.tuples(st.just("global"), st.just(0)),
    ),
    max_size=120,
)


@settings(max_examples=300, deadline=None)
@given(steps, st.sampled_from([1, 2, 4]), st.lists(conditions, min_size=1, max_size=3))
def test_every_event_recorded_or_dropped_exactly_once(
    plan: list[tuple[str, int]], capacity: int, conds: list[Condition]
) -> None:
    trace_tap = RingTap(1, Kind.SAMPLE, capacity=capacity)
    counter_tap = RingTap(2, Kind.SAMPLE, capacity=capacity)
    sample_tap = RingTap(3, Kind.SAMPLE, capacity=capacity)
    counter = Counter(width=3, tap=counter_tap)
    sampler = Sampler(sample_tap)
    trig = Trigger(conds, [TraceAction(trace_tap), CountAction(counter)])
    g = GlobalTrigger([counter, sampler])
    taps = (trace_tap, counter_tap, sample_tap)
    kept: dict[int, list[tuple[int, int]]] = {t.probe: [] for t in taps}
    dropped = dict.fromkeys(kept, 0)
    expected_trace: list[tuple[int, int]] = []
    expected_snap: list[tuple[int, int, int]] = []

    def drain() -> None:
        for tap in taps:
            rec, d = tap.drain()
            kept[tap.probe] += list(zip(rec["ticks"].tolist(), rec["value"].tolist(), strict=True))
            dropped[tap.probe] += d

    for ticks, (what, v) in enumerate(plan):
        if what == "observe":
            sampler.hold(v)
            if trig.observe(ticks, v):
                expected_trace.append((ticks, v))
        elif what == "drain":
            drain()
        else:
            g.fire(ticks)
            expected_snap.append((ticks, counter.total, sampler.held))
    drain()

    fired = len(expected_trace)
    assert trig.fired == fired == counter.total
    # Every firing is either kept or dropped, never both, none lost; kept ones in order.
    assert len(kept[1]) + dropped[1] == fired
    assert set(kept[1]) <= set(expected_trace)
    assert kept[1] == [e for e in expected_trace if e in set(kept[1])]
    for probe, col in ((2, 1), (3, 2)):
        assert len(kept[probe]) + dropped[probe] == g.fires == len(expected_snap)
        want = [(s[0], s[col]) for s in expected_snap]
        it = iter(want)
        assert all(k in it for k in kept[probe])  # an in-order subsequence
