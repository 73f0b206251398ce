"""The emulated device clock: spec text round trips and errors, readings consistent with the truth
(the inverse map), tick quantisation, drift and a forward step."""

from __future__ import annotations

import math
import time

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from streamscope.core.clock import Clock
from streamscope.core.errors import ConfigError
from streamscope.core.native import implementations
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec

VALID = "rate_ppm, offset_s, drift_ppb_s, tick_ns, step_at_s, step_ns"


# -- spec text ------------------------------------------------------------------------------------


def test_parse_reads_every_key() -> None:
    spec = EmulatedClockSpec.parse(
        " rate_ppm=37, offset_s=12.5,drift_ppb_s=1,tick_ns=7.5,step_at_s=2,step_ns=40 "
    )
    assert spec == EmulatedClockSpec(37.0, 12.5, 1.0, 7.5, 2.0, 40.0)


def test_missing_keys_take_defaults() -> None:
    assert EmulatedClockSpec.parse("tick_ns=4") == EmulatedClockSpec(tick_ns=4.0)
    assert EmulatedClockSpec.parse("") == EmulatedClockSpec()
    assert EmulatedClockSpec.parse("step_at_s=none").step_at_s is None


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("rate=3", "'rate'"),
        ("tick_ns=abc", "tick_ns='abc'"),
        ("tick_ns=0", "tick_ns must be > 0"),
        ("tick_ns=-2", "tick_ns must be > 0"),
        ("offset_s=nan", "offset_s must be a finite"),
        ("rate_ppm=inf", "rate_ppm must be a finite"),
        ("rate_ppm", "rate_ppm needs a value"),
        ("tick_ns=1,tick_ns=2", "tick_ns is given twice"),
        ("rate_ppm=-999000,rate_step_ppm=-2000", "rate_ppm + rate_step_ppm must be > -1000000"),
        ("rate_step_at_s=x", "rate_step_at_s='x'"),
        ("rate_ppm=-1000000", "rate_ppm must be > -1000000"),
    ],
)
def test_bad_specs_name_the_key_and_list_valid_ones(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        EmulatedClockSpec.parse(text)
    msg = str(info.value)
    assert key in msg
    assert f"valid keys: {VALID}" in msg
    assert repr(text) in msg


def test_constructor_validates_too() -> None:
    with pytest.raises(ConfigError, match="tick_ns must be > 0"):
        EmulatedClockSpec(tick_ns=0.0)


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


@given(
    rate=st.floats(min_value=-999_999.0, max_value=1e6),
    offset=finite,
    drift=finite,
    tick=st.floats(min_value=1e-6, max_value=1e9, exclude_min=False),
    step_at=st.none() | finite,
    step=st.floats(min_value=0.0, max_value=1e12),
)
def test_str_parses_back_exactly(
    rate: float, offset: float, drift: float, tick: float, step_at: float | None, step: float
) -> None:
    spec = EmulatedClockSpec(rate, offset, drift, tick, step_at, step)
    assert EmulatedClockSpec.parse(str(spec)) == spec


def test_random_specs_stay_in_range_and_parse_back() -> None:
    rng = np.random.default_rng(7)
    specs = [EmulatedClockSpec.random(rng) for _ in range(400)]
    for spec in specs:
        assert abs(spec.rate_ppm) <= 100
        assert abs(spec.offset_s) <= 1000
        assert abs(spec.drift_ppb_s) <= 10
        assert 1.0 <= spec.tick_ns <= 2000.0
        assert EmulatedClockSpec.parse(str(spec)) == spec
    assert 0 < sum(s.step_at_s is not None for s in specs) < len(specs)
    assert min(s.tick_ns for s in specs) < 2 and max(s.tick_ns for s in specs) > 1000


# -- readings and truth ---------------------------------------------------------------------------


def test_is_a_clock_with_the_nominal_tick() -> None:
    clock = EmulatedClock(EmulatedClockSpec(rate_ppm=50, tick_ns=7.5), time.monotonic_ns())
    assert isinstance(clock, Clock)
    assert clock.tick_period_ns == 7.5
    assert clock.domain == "emulated"


def test_known_values_without_drift() -> None:
    # offset 2 s, +100 ppm, 4 ns ticks: 1 s of host time later the device reads 3.0001 s.
    clock = EmulatedClock(EmulatedClockSpec(rate_ppm=100, offset_s=2, tick_ns=4), 1_000)
    assert clock.ticks_at([1_000])[0] == 500_000_000
    assert clock.ticks_at([1_000 + 1_000_000_000])[0] == 750_025_000
    assert clock.true_host_ns(750_025_000) == pytest.approx(1_000 + 1e9, abs=1e-3)


def test_drift_bends_the_map_as_specified() -> None:
    # +10 ppb/s for 1000 s adds ½·10e-9·1000² s = 5 ms to the device's time.
    clock = EmulatedClock(EmulatedClockSpec(drift_ppb_s=10), 0)
    assert clock.ticks_at([1_000_000_000_000])[0] == 1_000_005_000_000
    slope = clock.true_s_ns_per_tick(1_000_005_000_000)
    assert slope == pytest.approx(1 / (1 + 10e-9 * 1000), rel=1e-12)


def test_now_ticks_lies_between_the_host_reads_around_it() -> None:
    rng = np.random.default_rng(3)
    for _ in range(200):
        spec = EmulatedClockSpec.random(rng)
        clock = EmulatedClock(spec, time.monotonic_ns() - int(rng.integers(0, 20_000_000_000)))
        before = time.monotonic_ns()
        k = clock.now_ticks()
        after = time.monotonic_ns()
        # The reading k means the device was somewhere in [k, k + 1) while the host read its clock.
        lo = float(clock.true_host_ns(k))
        hi = float(clock.true_host_ns(k + 1))
        assert lo <= after + 1e-3, (spec, lo - after)
        assert hi >= before - 1e-3, (spec, before - hi)
        assert clock.ticks_at([before])[0] <= k <= clock.ticks_at([after])[0]


@given(
    spec=st.builds(
        EmulatedClockSpec,
        rate_ppm=st.floats(-100, 100),
        offset_s=st.floats(-1000, 1000),
        drift_ppb_s=st.floats(-10, 10),
        tick_ns=st.floats(1, 2000),
    ),
    host=st.lists(st.integers(0, 10**13), min_size=1, max_size=50),
)
def test_ticks_at_and_true_host_ns_are_inverse(spec: EmulatedClockSpec, host: list[int]) -> None:
    clock = EmulatedClock(spec, 10**12)
    t = np.array(host, dtype=np.int64) + 10**12
    k = clock.ticks_at(t)
    # Host t lies in [true(k), true(k + 1)): the defining property of a floor reading.
    tol = 1e-6 * spec.tick_ns + 0.05  # float rounding of ~1e13 ns values
    assert np.all(clock.true_host_ns(k) <= t + tol)
    assert np.all(clock.true_host_ns(k + 1) > t - tol)


@given(
    step_ns=st.floats(1e3, 1e7).flatmap(lambda v: st.sampled_from([v, -v])),
    rate_step_ppm=st.floats(-100, 100),
    step_at=st.floats(0.01, 0.09),
    rate_at=st.floats(0.01, 0.09),
    tick_ns=st.floats(1, 2000),
    seed=st.integers(0, 2**31),
)
@example(step_ns=-90522.0, rate_step_ppm=0.0, step_at=0.078125, rate_at=0.0625, tick_ns=1.0, seed=0)
@example(step_ns=-1000.0, rate_step_ppm=0.0, step_at=0.05, rate_at=0.0625, tick_ns=116.0,
         seed=1_210_912_967)  # a step back into the middle of a tick  # fmt: skip
@example(step_ns=1000.0, rate_step_ppm=0.0, step_at=0.0625, rate_at=0.07164971977672653,
         tick_ns=497.0, seed=441819)  # a tick across a change of rate is one visit  # fmt: skip
def test_readings_in_order_invert_through_steps_back_and_forth(
    step_ns: float, rate_step_ppm: float, step_at: float, rate_at: float, tick_ns: float, seed: int
) -> None:
    spec = EmulatedClockSpec(
        rate_ppm=30, offset_s=5, tick_ns=tick_ns, step_at_s=step_at, step_ns=step_ns,
        rate_step_at_s=rate_at, rate_step_ppm=rate_step_ppm,
    )  # fmt: skip
    clock = EmulatedClock(spec, 10**12)
    rng = np.random.default_rng(seed)
    # Readings one after another through both events (a backward step repeats positions: only
    # the order tells which time a repeated reading was taken at).
    t = 10**12 + np.sort(rng.integers(0, 100_000_000, 400))
    k = clock.ticks_at(t)
    early, late = clock.true_host_ns_in_order(k), clock.true_host_ns_latest(k)
    tol = 1e-6 * tick_ns + 0.05
    assert np.all(np.diff(early) >= 0)
    # Each reading was taken inside [earliest, latest + one tick): a reading k means the
    # position was in [k, k + 1). Only a backward step makes the two differ: by its size, and
    # by up to one tick more where it lands in the middle of a tick (the second visit then
    # starts at the step, not at the tick's start).
    assert np.all(early <= t + tol)
    assert np.all(t - late < tick_ns * (1 + 2e-4) + tol)
    repeat = max(-step_ns, 0) + (tick_ns if step_ns < 0 else 0)
    assert np.all(late - early <= repeat * (1 + 2e-4) + tol)


def test_readings_are_quantised_to_whole_ticks() -> None:
    clock = EmulatedClock(EmulatedClockSpec(tick_ns=2000.0), 0)
    t = np.arange(0, 100_000, 7, dtype=np.int64)
    k = clock.ticks_at(t)
    assert np.array_equal(k, t // 2000)
    assert np.all(np.diff(k) >= 0)
    # Host times within one tick share one reading: the tick period is 2000 host ns here.
    assert len(np.unique(k)) == 50


def test_forward_step_jumps_the_reading_and_the_truth_skips_it() -> None:
    spec = EmulatedClockSpec(tick_ns=10.0, step_at_s=1.0, step_ns=5_000.0)
    clock = EmulatedClock(spec, 0)
    k = clock.ticks_at([999_999_990, 999_999_999, 1_000_000_000, 1_000_000_010])
    assert k.tolist() == [99_999_999, 99_999_999, 100_000_500, 100_000_501]
    # Positions skipped by the step map to the step's host time; after it, the shifted line.
    truth = clock.true_host_ns([99_999_999.0, 100_000_000.0, 100_000_250.0, 100_000_501.0])
    assert truth.tolist() == pytest.approx([999_999_990, 1e9, 1e9, 1_000_000_010], abs=1e-3)


def test_true_host_ns_is_vectorised_and_monotone() -> None:
    clock = EmulatedClock(EmulatedClockSpec.parse("rate_ppm=-80,offset_s=-900,drift_ppb_s=-9"), 5)
    x = np.linspace(-1e12, 1e12, 10_001)
    t = clock.true_host_ns(x)
    assert t.shape == x.shape
    assert np.all(np.diff(t) > 0)
    assert math.isclose(float(t[0]), float(clock.true_host_ns(x[0])))


@pytest.mark.parametrize(
    "text",
    [
        "rate_ppm=20,step_at_s=0.5,step_ns=-300000",
        "rate_ppm=-40,tick_ns=7.5,rate_step_at_s=0.3,rate_step_ppm=90",
        "rate_ppm=5,drift_ppb_s=3,step_at_s=0.2,step_ns=40000,rate_step_at_s=0.7,rate_step_ppm=-60",
    ],
)
def test_steps_back_and_changes_of_rate_read_and_invert_exactly(text: str) -> None:
    """A clock set back, or whose rate changes: the text round-trips, every implementation
    reads the same ticks, and the truth maps each reading back to when the device read it."""
    spec = EmulatedClockSpec.parse(text)
    assert EmulatedClockSpec.parse(str(spec)) == spec
    clock = EmulatedClock(spec, 1_000_000_000)
    host = 1_000_000_000 + np.arange(0, 1_000_000_000, 997_003, dtype=np.int64)
    ticks = clock.ticks_at(host)
    for impl in implementations().values():
        c = clock.native_clock(impl)
        assert [c.ticks_at(int(h)) for h in host[:200]] == ticks[:200].tolist()
    back = clock.true_host_ns(ticks + 0.5)  # the middle of each reading's tick
    tick_host = spec.tick_ns / (1 + (spec.rate_ppm - abs(spec.rate_step_ppm)) * 1e-6)
    if spec.step_ns >= 0:
        assert np.all(np.abs(back - host) <= tick_host + 1.0)
    else:  # a repeated position maps to its first visit: never later than the reading
        assert np.all(back <= host + tick_host + 1.0)
