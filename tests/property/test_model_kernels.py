"""The virtual queues' compiled loops (model/_kernels.c) against their numpy references, bit for
bit, on random inputs: histogram draws, occupancy from ordered events, the insertions per
sub-window of the dependence test's null, the bus's per-item times, a profile's insertion
times, a whole tandem replication, and PCG64's uniforms."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.typing import NDArray

from streamscope.model import dependence, replay, sampling
from streamscope.model import occupancy as occ
from streamscope.model._inputs import ModelInputError
from streamscope.model.estimator import replicates
from streamscope.model.recursions import KERNELS, lindley

F64 = NDArray[np.float64]

pytestmark = pytest.mark.skipif(KERNELS is None, reason="the compiled loops were not built")


def _histogram(rng: np.random.Generator) -> tuple[F64, F64]:
    """Random edges (some bins empty of width, some ties) and weights (some zero)."""
    m = int(rng.integers(1, 200))
    widths = rng.choice([0.0, 1.0, 7.5, 1e3, 1e6], size=m) * rng.random(m)
    edges = np.concatenate(([float(rng.choice([0.0, 3.0, 1e4]))], np.cumsum(widths)))
    weights = rng.choice([0.0, 1.0, 3.0, 1e-9, 1e9], size=m, p=[0.3, 0.3, 0.2, 0.1, 0.1])
    if weights.sum() <= 0.0:
        weights[int(rng.integers(0, m))] = 1.0
    return edges, weights


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(0, 3000))
def test_histogram_draws_compiled_equal_numpy(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    edges, weights = _histogram(rng)
    cdf = np.cumsum(weights)
    u, v = rng.random(n), rng.random(n)
    if n:  # the ends of the uniforms' range, and exact cdf values
        u[0], v[0] = 0.0, 0.0
        u[-1] = np.nextafter(1.0, 0.0)
        picks = rng.integers(0, cdf.size, size=min(n, 20))
        u[: picks.size] = cdf[picks] / cdf[-1]
    ref = sampling.histogram_draws_py(edges, cdf, u, v)
    got = u.copy()
    assert KERNELS.histogram_draws(edges, cdf, got, v)
    assert np.array_equal(got, ref)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**128 - 1), st.integers(0, 5000), st.integers(0, 3))
def test_uniforms_compiled_are_the_generators(seed: int, n: int, before: int) -> None:
    """Uniforms drawn compiled from a PCG64's state: bit for bit ``rng.random(n)``, and the
    generator left where its own draws leave it (its next draws, of any kind, the same)."""
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    for r in (ours, theirs):  # any state, including one a 32-bit draw left half used
        r.integers(0, 2**31, before, dtype=np.uint32)
    assert np.array_equal(sampling.uniforms(ours, n), theirs.random(n))
    assert ours.bit_generator.state == theirs.bit_generator.state
    assert np.array_equal(ours.random(5), theirs.random(5))
    assert (
        ours.integers(0, 2**31, 3, dtype=np.uint32).tolist()
        == theirs.integers(0, 2**31, 3, dtype=np.uint32).tolist()
    )


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 3000))
def test_histogram_draws_from_the_generators_state_equal_numpy(seed: int, n: int) -> None:
    """Histogram draws with their uniforms drawn in the same compiled pass: bit for bit
    numpy's (rng.random twice, then searchsorted), and the generator left as numpy leaves it."""
    edges, weights = _histogram(np.random.default_rng(seed))
    ours, theirs = np.random.default_rng(seed), np.random.default_rng(seed)
    # the edges as _histogram makes them (not always ordered), past the checks, as the loop takes any
    got = sampling.sample_histogram(sampling._ready(edges, weights), n, ours)
    cdf = np.cumsum(weights)
    u, v = theirs.random(n), theirs.random(n)
    assert np.array_equal(got, sampling.histogram_draws_py(edges, cdf, u, v))
    assert ours.bit_generator.state == theirs.bit_generator.state


def test_histogram_draws_from_the_generators_state_leave_an_infinite_total() -> None:
    """Weights whose total is not finite: the compiled pass draws nothing, numpy decides."""
    edges, weights = np.array([0.0, 1.0, 2.0]), np.array([1e308, 1e308])
    state = np.random.default_rng(2).bit_generator.state["state"]
    x, inc, low = state["state"], state["inc"], (1 << 64) - 1
    out = np.zeros(100)
    ours, theirs = np.random.default_rng(2), np.random.default_rng(2)
    with np.errstate(over="ignore", invalid="ignore"):  # the total overflows
        cdf = np.cumsum(weights)
        assert (
            KERNELS.pcg64_histogram_draws(x >> 64, x & low, inc >> 64, inc & low, edges, cdf, out)
            is None
        )
        got = sampling.sample_histogram((edges, weights), 100, ours)
        ref = sampling.histogram_draws_py(edges, cdf, theirs.random(100), theirs.random(100))
    assert not out.any()
    assert np.array_equal(got, ref)


def test_uniforms_of_another_generator_are_its_own() -> None:
    for bits in (np.random.Philox(5), np.random.PCG64DXSM(5), np.random.MT19937(5)):
        ours, theirs = np.random.Generator(bits), np.random.Generator(type(bits)(5))
        assert np.array_equal(sampling.uniforms(ours, 1000), theirs.random(1000))


def test_histogram_draws_out_of_range_as_numpy() -> None:
    """Uniforms outside [0, 1) (not the generator's, but the loop takes any) land where
    searchsorted puts them; a total that is not finite is left to numpy."""
    edges, cdf = np.array([0.0, 1.0, 2.0, 4.0]), np.array([1.0, 1.0, 3.0])
    u = np.array([-1.0, -0.0, 1.0, 1.5, np.inf, -np.inf, np.nan, 1.0 / 3.0])
    v = np.full(u.size, 0.5)
    got = u.copy()
    assert KERNELS.histogram_draws(edges, cdf, got, v)
    assert np.array_equal(got, sampling.histogram_draws_py(edges, cdf, u, v), equal_nan=True)
    unbounded = np.array([1.0, np.inf, np.inf])
    got = u.copy()
    assert not KERNELS.histogram_draws(edges, unbounded, got, v)
    assert np.array_equal(got, u, equal_nan=True)


def test_sample_histogram_draws_the_same_compiled_and_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The whole draw, the generator's stream included: the same numbers either way."""
    h = (np.array([0.0, 1.0, 2.0, 2.0, 10.0, 1e5]), np.array([1.0, 0.0, 5.0, 2.0, 0.5]))
    fast = sampling.sample_histogram(h, 5000, np.random.default_rng(3))
    monkeypatch.setattr(sampling, "HISTOGRAM_DRAWS", None)
    slow = sampling.sample_histogram(h, 5000, np.random.default_rng(3))
    assert np.array_equal(fast, slow)


def _events(rng: np.random.Generator, n: int) -> tuple[F64, F64]:
    """A FIFO queue's arrivals and removals, with ties (zero gaps, zero services)."""
    gaps = rng.exponential(10.0, n) * (rng.random(n) < 0.8)
    service = rng.exponential(8.0, n) * (rng.random(n) < 0.9)
    a = np.cumsum(gaps)
    return a, lindley(a, service) - service


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(0, 400), st.floats(-50.0, 500.0),
    st.floats(0.0, 5000.0), st.booleans(),
)  # fmt: skip
def test_occupancy_compiled_equals_the_sort(
    seed: int, n: int, t0: float, width: float, ordered: bool
) -> None:
    """Ordered events take the compiled merge, others (and bad input) the sort; either way the
    levels are those of the stable sort, bit for bit."""
    rng = np.random.default_rng(seed)
    a, d = _events(rng, n)
    if ordered:
        d = np.maximum.accumulate(d)
    else:  # stays out of order: not the merge's to decide
        d = np.maximum(d + rng.normal(0.0, 20.0, n), a)
    t1 = t0 + width
    ref = occ.occupancy_py(a, d, t0, t1)
    got = occ.occupancy_from_events(a, d, t0, t1)
    assert np.array_equal(got[0], ref[0])
    assert np.array_equal(got[1], ref[1])


def test_occupancy_compiled_leaves_bad_input_to_the_checks() -> None:
    """A departure before its arrival, a value not finite or a reversed window are reported
    as the general path reports them."""
    a = np.array([0.0, 1.0, 2.0])
    with pytest.raises(occ.ModelInputError, match="customer 1 departs"):
        occ.occupancy_from_events(a, np.array([0.5, 0.5, 3.0]), 0.0, 4.0)
    with pytest.raises(occ.ModelInputError, match="finite"):
        occ.occupancy_from_events(a, np.array([0.5, np.inf, 3.0]), 0.0, 4.0)
    with pytest.raises(occ.ModelInputError, match="t1 >= t0"):
        occ.occupancy_from_events(a, a + 1.0, 4.0, 0.0)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(0, 3000), st.integers(1, 300),
    st.sampled_from([1.0, 0.1, 7.3e6, 1e9 / 128, 3.0]),
)  # fmt: skip
def test_window_counts_compiled_equal_numpy(seed: int, n: int, k: int, width: float) -> None:
    """Insertions per sub-window, the floor division at sub-window edges included (gaps of a
    whole number of widths, and of none)."""
    rng = np.random.default_rng(seed)
    span = width * k
    gaps = rng.exponential(span / max(n, 1), n)
    snap = rng.random(n) < 0.3
    gaps[snap] = width * rng.integers(0, 3, int(snap.sum()))
    ref = dependence.window_counts_py(gaps, span, width, k)
    got = np.full(k, -7, dtype=np.int64)
    assert KERNELS.window_counts(gaps, span, width, got) == 0
    assert np.array_equal(got, ref)


def test_window_counts_leave_an_insertion_before_zero_to_numpy() -> None:
    got = np.zeros(4, dtype=np.int64)
    assert KERNELS.window_counts(np.array([-1.0, 2.0]), 4.0, 1.0, got) == -1


def test_renewal_profiles_the_same_compiled_and_in_python(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dependence test's null, the generator's stream included: the same counts either way."""
    h = (np.array([0.0, 10.0, 20.0, 40.0, 1e3]), np.array([5.0, 3.0, 1.0, 0.2]))
    fast = dependence.renewal_profiles(h, 100.0, 64, np.random.default_rng(9), 20)
    monkeypatch.setattr(dependence, "WINDOW_COUNTS", None)
    monkeypatch.setattr(sampling, "HISTOGRAM_DRAWS", None)
    slow = dependence.renewal_profiles(h, 100.0, 64, np.random.default_rng(9), 20)
    assert np.array_equal(fast, slow)


@pytest.mark.parametrize("width", [1.0, 0.1, 1e9 / 128, 7.3e6, 3.0, 1.0 / 3.0])
def test_window_counts_floor_division_at_the_edges(width: float) -> None:
    """An insertion at, or an ulp either side of, a sub-window's edge falls where numpy's //
    puts it."""
    k = 50
    got = np.zeros(k, dtype=np.int64)
    for j in range(k):
        for t in (j * width, np.nextafter(j * width, 0.0), np.nextafter(j * width, np.inf)):
            one = np.array([t])
            assert KERNELS.window_counts(one, width * k, width, got) == 0
            assert np.array_equal(got, dependence.window_counts_py(one, width * k, width, k))


@settings(max_examples=200, deadline=None)
@given(
    st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 32),
    st.sampled_from([math.inf, 0.0, 700.0]), st.booleans(),
)  # fmt: skip
def test_transfer_items_compiled_equal_numpy(
    seed: int, n: int, b: int, timeout: float, held: bool
) -> None:
    """Each item's bus times from its transfer's: compiled bit for bit the numpy expansion,
    preloaded items, per-item transfer time, latency and a full device buffer alike."""
    from streamscope.model.bulk import _batches, _rule, _transfers, items_py

    rng = np.random.default_rng(seed)
    a = np.cumsum(rng.exponential(rng.uniform(10, 2000), n))
    lo = int(rng.integers(1, b + 1))
    per_item = float(rng.choice([0.0, 3.5]))
    a, rule = _rule(a, b, lo, rng.uniform(100, 5000, n), per_item, timeout,
                    float(rng.uniform(0, 3000)))  # fmt: skip
    p = int(rng.integers(0, min(n, 5) + 1))
    s2 = rng.exponential(500, n) if held else None
    cap2 = int(rng.integers(max(b - 1, 0), b + 20))
    end = float(a[-1]) + 1000.0
    ref = items_py(a, p, rule, _transfers(a, p, rule, end, s2, cap2), held)
    got = _batches(a, p, rule, end, s2, cap2)
    for x, y in zip(got, ref, strict=True):
        assert (x is None) == (y is None)
        if x is not None and y is not None:
            assert np.array_equal(x, y)


def _tandem_inputs(
    seed: int, n: int
) -> tuple[F64, F64, replay.Bus, int, float, tuple[float, float, float]]:
    """A replication's items (start items at 0, ties, zero services), a bus with a bounded
    device buffer, the items already on the head side, the stream's end and the windows."""
    rng = np.random.default_rng(seed)
    k0 = int(rng.integers(0, min(n, 6) + 1))
    gaps = rng.exponential(rng.uniform(10, 2000), n - k0) * (rng.random(n - k0) < 0.9)
    a = np.concatenate((np.zeros(k0), np.cumsum(gaps)))
    s = rng.exponential(rng.uniform(10, 3000), n) * (rng.random(n) < 0.95)
    b = int(rng.choice([1, 1, 1, 2, 3, 8]))  # one a transfer: a bus that may never wait
    bus = replay.Bus(
        b, float(rng.choice([0.0, 250.0])), float(rng.choice([math.inf, 0.0, 700.0])),
        float(rng.choice([0.0, 400.0])), int(rng.choice([rng.integers(b - 1, b + 12), 10_000])),
    )  # fmt: skip
    head0 = int(rng.integers(0, k0 + 1))
    frame = float(a[-1]) + float(rng.uniform(1.0, 5000.0))
    end = float(a[-1]) if rng.random() < 0.5 else frame
    tail_ns, head_ns = (frame if rng.random() < 0.5 else float(rng.uniform(1.0, frame))
                        for _ in range(2))  # fmt: skip
    return a, s, bus, head0, end, (frame, tail_ns, head_ns)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 400))
def test_tandem_frame_compiled_equals_the_calls_it_fuses(seed: int, n: int) -> None:
    """One tandem replication in one compiled call: the levels of the whole queue and of its
    two sides bit for bit those of tandem_bulk and the three occupancies."""
    a, s, bus, head0, end, windows = _tandem_inputs(seed, n)
    ref = replay.tandem_py(a, s, bus, head0, end, windows)
    out = np.empty((3, n + 1))
    keep = KERNELS.tandem_frame(
        a, s, head0, bus.bulk_size, bus.bulk_size, bus.transfer_ns, 0.0, bus.timeout_ns,
        bus.latency_ns, end, bus.capacity2, *windows, out,
    )  # fmt: skip
    assert keep is not None
    for row, k, want in zip(out, keep, ref, strict=True):
        assert np.array_equal(row[:k], want)
    got = replay._tandem(a, s, bus, head0, end, windows)
    for x, y in zip(got, ref, strict=True):
        assert x.dtype == y.dtype and np.array_equal(x, y)


def test_tandem_frame_leaves_what_the_checks_report_to_them() -> None:
    """Inputs tandem_bulk refuses come back None from the compiled call, and the same error
    from the model."""
    a, s, bus, head0, end, windows = _tandem_inputs(3, 50)
    bad_s = s.copy()
    bad_s[7] = -1.0
    unsorted = a.copy()
    unsorted[[10, 20]] = unsorted[[20, 10]]
    cases = [
        (a, bad_s, bus, end),
        (unsorted, s, bus, end),
        (a, s, dataclasses.replace(bus, bulk_size=bus.capacity2 + 2), end),
        (a, s, bus, float(a[-1]) - 1.0),
        (a, s, dataclasses.replace(bus, latency_ns=math.nan), end),
    ]
    for x, sv, bs, e in cases:
        out = np.empty((3, x.size + 1))
        assert KERNELS.tandem_frame(
            x, sv, head0, bs.bulk_size, bs.bulk_size, bs.transfer_ns, 0.0, bs.timeout_ns,
            bs.latency_ns, e, bs.capacity2, *windows, out,
        ) is None  # fmt: skip
        with pytest.raises(ModelInputError):
            replay.tandem_py(x, sv, bs, head0, e, windows)
        with pytest.raises(ModelInputError):
            replay._tandem(x, sv, bs, head0, e, windows)


def test_replications_the_same_with_the_fused_call_and_without(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = (np.array([0.0, 50.0, 100.0, 400.0, 2000.0]), np.array([5.0, 3.0, 1.0, 0.2]))
    svc = (np.array([0.0, 40.0, 90.0, 300.0]), np.array([4.0, 3.0, 1.0]))
    bus = replay.Bus(1, 0.0, math.inf, 0.0, 64)

    def runs() -> list[replay.SubQueues]:
        out = replicates(h, svc, 2e5, "tandem", bus, np.random.default_rng(8), 5,
                         start_tail=2, start_head=3, ended=True)  # fmt: skip
        return [o for o, _ in out]

    fast = runs()
    monkeypatch.setattr(replay, "TANDEM_FRAME", None)
    for x, y in zip(fast, runs(), strict=True):
        assert all(np.array_equal(p, q) for p, q in zip(x, y, strict=True))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 64), st.floats(1e-3, 1e9))
def test_profile_times_compiled_equal_numpy(seed: int, k: int, width: float) -> None:
    """Insertion times from a profile's draws, sub-windows whose gaps are all 0 ns (spread
    evenly) and empty ones among them."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(0, 30, k) * (rng.random(k) < 0.7)
    busy = np.flatnonzero(counts)
    if busy.size == 0:
        return
    c = counts[busy].astype(np.int64)
    draws = rng.exponential(width / 20, int(c.sum()) + busy.size)
    first = np.concatenate(([0], np.cumsum(c + 1)[:-1]))
    for q in np.flatnonzero(rng.random(busy.size) < 0.2):  # every gap of the sub-window 0 ns
        draws[first[q] : first[q] + c[q] + 1] = 0.0
    total = np.add.reduceat(draws, first)
    ref = sampling.profile_times_py(draws, c, busy, total, first, width)
    got = np.empty(int(c.sum()))
    KERNELS.profile_times(draws, c, busy, total, width, got)
    assert np.array_equal(got, ref)


def test_sample_profile_draws_the_same_compiled_and_in_python(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = (np.array([0.0, 1.0, 5.0, 50.0, 500.0]), np.array([3.0, 2.0, 1.0, 0.5]))
    profile = sampling.Profile(np.array([0, 3, 10, 0, 0, 1, 40, 2]), 100.0)
    fast = sampling.sample_profile(h, profile, np.random.default_rng(4))
    monkeypatch.setattr(sampling, "HISTOGRAM_DRAWS", None)
    monkeypatch.setattr(sampling, "PROFILE_TIMES", None)
    slow = sampling.sample_profile(h, profile, np.random.default_rng(4))
    assert np.array_equal(fast, slow)


@pytest.mark.parametrize("width", [1e9, 500.0, 50.0])
def test_sample_profile_whose_bins_are_all_short_draws_as_from_them_made_again(
    width: float,
) -> None:
    """Where every bin is shorter than a sub-window the histogram is drawn from as it is: the
    same draws as from the short bins made into a histogram again (as where some are long)."""
    e, w = np.array([0.0, 1.0, 5.0, 50.0, 500.0]), np.array([3.0, 2.0, 1.0, 0.5])
    profile = sampling.Profile(np.array([0, 3, 10, 0, 0, 1, 40, 2]), width)
    got = sampling.sample_profile((e, w), profile, np.random.default_rng(9))
    short = e[1:] <= width
    again = sampling._ready(e[: int(np.flatnonzero(short)[-1]) + 2], w[short])
    counts, _ = sampling.as_profile(profile)
    busy = np.flatnonzero(counts)
    c = counts[busy]
    draws = sampling.sample_histogram(again, int(c.sum()) + busy.size, np.random.default_rng(9))
    first = np.concatenate(([0], np.cumsum(c + 1)[:-1]))
    total = np.add.reduceat(draws, first)
    assert np.array_equal(got, sampling.profile_times_py(draws, c, busy, total, first, width))


def test_a_histogram_checked_once_draws_as_its_edges_and_weights() -> None:
    """The replications check a histogram once and pass the checked one on: the same draws,
    residuals and mean gap as from the edges and weights themselves."""
    h = (np.array([0.0, 2.0, 3.0, 9.0, 9.0, 40.0]), np.array([4.0, 0.0, 2.5, 1.0, 0.25]))
    checked = sampling.histogram(h, "h")
    assert sampling.histogram(checked, "h") is checked
    assert sampling.mean_gap(checked) == sampling.mean_gap(h)
    for f in (
        lambda x, r: sampling.sample_histogram(x, 1000, r),
        lambda x, r: np.array([sampling.sample_residual(x, r) for _ in range(50)]),
        lambda x, r: sampling.renewal_gaps(x, 500.0, 20, r),
    ):
        assert np.array_equal(f(checked, np.random.default_rng(2)), f(h, np.random.default_rng(2)))
