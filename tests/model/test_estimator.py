"""Virtual-queue estimator and its self-check: seeded i.i.d., correlated and bus-bound sources in,
agreement with M/M/1 theory, acceptance/rejection rates and W1 gaps out (figures printed)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from streamscope.model import (
    Bus,
    FrameVerdict,
    ModelInputError,
    combine_frames,
    predict,
    sample_histogram,
    self_check,
    simulate_frame,
    w1_items,
)
from streamscope.model.estimator import Model

F64 = NDArray[np.float64]
GAP_NS = 1000.0
FRAME_NS = 1.0e7  # about 10k items per frame
SEEDS = range(20)
PHI = 0.98  # AR(1) coefficient of the latent order of the inter-insertion times
BUS = Bus(bulk_size=32, transfer_ns=20_000.0, timeout_ns=100_000.0)


def hist(x: F64, bins: int = 256) -> tuple[F64, F64]:
    w, e = np.histogram(x, bins=bins, range=(0.0, float(x.max()) * (1 + 1e-9)))
    return e.astype(np.float64), w.astype(np.float64)


def source(rng: np.random.Generator, service_ns: float, n: int) -> tuple[F64, F64]:
    return rng.exponential(GAP_NS, n), rng.exponential(service_ns, n)


def ar1_reorder(gaps: F64, phi: float, rng: np.random.Generator) -> F64:
    """The same values (so the same histogram) in the rank order of an AR(1) path."""
    z = np.empty(gaps.size)
    z[0] = rng.standard_normal()
    e = rng.standard_normal(gaps.size) * np.sqrt(1 - phi * phi)
    for k in range(1, gaps.size):  # test-only generator
        z[k] = phi * z[k - 1] + e[k]
    out: F64 = np.sort(gaps)[np.argsort(np.argsort(z))]
    return out


def test_sample_histogram_stays_in_weighted_bins() -> None:
    x = sample_histogram(
        ([0.0, 10.0, 20.0, 30.0], [1.0, 0.0, 3.0]), 40_000, np.random.default_rng(1)
    )
    assert not np.any((x >= 10.0) & (x < 20.0))
    frac = float(np.mean(x >= 20.0))
    print(f"fraction in [20, 30): {frac:.4f} (want 0.75)")
    assert abs(frac - 0.75) < 0.01


def test_ideal_prediction_matches_mm1_theory() -> None:
    rng = np.random.default_rng(7)
    gaps, service = source(rng, 600.0, 400_000)
    rho = float(service.mean() / gaps.mean())
    theory = rho * rho / (1 - rho)  # Lq: the item in service has left the channel
    pred = predict(hist(gaps), hist(service), 1.0e8, rng, model="ideal", replications=4)
    err = pred.mean_occupancy / theory - 1
    print(
        f"rho={rho:.4f} Lq theory={theory:.4f} predicted={pred.mean_occupancy:.4f} err={err:+.2%}"
    )
    assert pred.items_simulated > 350_000
    assert pred.tail == (1.0,)
    assert abs(err) < 0.05


def _frame(
    seed: int,
    model: Model,
    *,
    correlated: bool = False,
    service_ns: float = 600.0,
    clock_bias_items: float = 0.0,
) -> FrameVerdict:
    rng = np.random.default_rng(1000 + seed)
    gaps, service = source(rng, service_ns, int(FRAME_NS / GAP_NS * 1.3))
    if correlated:
        gaps = ar1_reorder(gaps, PHI, rng)
    bus = BUS if model == "tandem" else None
    truth = simulate_frame(gaps, service, FRAME_NS, model, bus)
    return self_check(
        hist(gaps),
        hist(service),
        FRAME_NS,
        truth.tail,
        truth.head,
        rng,
        model=model,
        bus=bus,
        clock_bias_items=clock_bias_items,
    )


@pytest.mark.parametrize("model", ["ideal", "tandem"])
def test_self_check_accepts_the_model_itself(model: Model) -> None:
    verdicts = [_frame(s, model, service_ns=500.0) for s in SEEDS]
    ok = sum(v.verdict == "consistent" for v in verdicts)
    w1 = np.median([v.w1_items for v in verdicts])
    thr = np.median([v.threshold_items for v in verdicts])
    print(f"{model}: consistent {ok}/{len(verdicts)}; median W1={w1:.3f} threshold={thr:.3f}")
    assert ok >= 0.9 * len(verdicts)
    assert combine_frames(verdicts).verdict == "consistent"


def test_self_check_rejects_autocorrelated_arrivals() -> None:
    verdicts = [_frame(s, "ideal", correlated=True) for s in SEEDS]
    rej = sum(v.verdict == "rejected" for v in verdicts)
    w1 = np.median([v.w1_items for v in verdicts])
    thr = np.median([v.threshold_items for v in verdicts])
    print(
        f"AR(1) phi={PHI}: rejected {rej}/{len(verdicts)}; median W1={w1:.3f} threshold={thr:.3f}"
    )
    assert rej >= 0.95 * len(verdicts)
    run = combine_frames(verdicts)
    print(run.to_dict())
    assert run.verdict == "rejected"


def test_ideal_model_fails_where_the_bus_dominates() -> None:
    rng = np.random.default_rng(42)
    gaps, service = source(rng, 500.0, int(FRAME_NS / GAP_NS * 1.3))
    truth = simulate_frame(gaps, service, FRAME_NS, "tandem", BUS)
    h_in, h_out = hist(gaps), hist(service)
    ideal = predict(h_in, h_out, FRAME_NS, rng, model="ideal")
    tandem = predict(h_in, h_out, FRAME_NS, rng, model="tandem", bus=BUS)
    w_ideal = w1_items(truth.whole, ideal.whole)
    w_tandem = w1_items(truth.whole, tandem.whole)
    mean_true = float(np.dot(np.arange(truth.whole.size), truth.whole) / truth.whole.sum())
    print(
        f"true mean={mean_true:.2f}; ideal mean={ideal.mean_occupancy:.2f} W1={w_ideal:.3f}; "
        f"tandem mean={tandem.mean_occupancy:.2f} W1={w_tandem:.3f}"
    )
    assert w_ideal > 5 * w_tandem
    verdict = self_check(h_in, h_out, FRAME_NS, truth.tail, truth.head, rng, model="ideal")
    print(verdict.to_dict())
    assert verdict.verdict == "rejected"


def _served_slower(
    seed: int, slower: float, service_ns: float, **kw: float
) -> tuple[FrameVerdict, float]:
    """A frame whose link serves ``slower`` x the service times the model is given: its
    verdict, and the true mean occupancy of the whole queue."""
    rng = np.random.default_rng(500 + seed)
    gaps, service = source(rng, service_ns, int(FRAME_NS / GAP_NS * 1.3))
    truth = simulate_frame(gaps, service * slower, FRAME_NS, "tandem", BUS)
    v = self_check(
        hist(gaps), hist(service), FRAME_NS, truth.tail, truth.head, rng, model="tandem",
        bus=BUS, **kw,
    )  # fmt: skip
    return v, float(np.dot(np.arange(truth.whole.size), truth.whole) / truth.whole.sum())


def test_a_difference_the_buffers_tell_apart_is_tolerated_when_small() -> None:
    # Services 8 % slower than the model's: told apart in every frame of 13k items, yet the
    # estimate is within 4 % of the truth: consistent, decided by the tolerance.
    for seed in range(10):
        v, true = _served_slower(seed, 1.08, 700.0)
        strict, _ = _served_slower(seed, 1.08, 700.0, tolerance=0.0)
        print(seed, v.to_dict(), f"true mean {true:.2f}")
        assert v.distinguishable and v.excess_items > 0.0
        assert v.verdict == "consistent" and v.decided_by == "tolerance"
        assert abs(v.estimate_items - true) <= v.tolerance_items
        assert v.tolerance_items == pytest.approx(0.15 * v.estimate_items)
        # With no tolerance but the one-item floor: rejected exactly where W1 passes it.
        assert strict.tolerance_items == 1.0
        want = "rejected" if strict.w1_items - strict.clock_bias_items > 1.0 else "consistent"
        assert strict.verdict == want


def test_a_difference_beyond_the_tolerance_is_rejected() -> None:
    # Services 70 % slower: the estimate falls short by about the tolerance; the verdict
    # follows whether it is off by more, in 9 of 10 frames or better.
    agree = 0
    for seed in range(10):
        v, true = _served_slower(seed, 1.7, 500.0)
        off = abs(v.estimate_items - true) > v.tolerance_items
        print(seed, v.verdict, v.decided_by, f"estimate {v.estimate_items:.2f} true {true:.2f}")
        assert v.decided_by in ("discrepancy", "tolerance")
        agree += off == (v.verdict == "rejected")
    assert agree >= 9


def test_clock_bias_widens_threshold_and_run_rule() -> None:
    # Correlated data, rejected without bias, is let through once the clock bias covers it.
    base = _frame(3, "ideal", correlated=True, service_ns=300.0)
    bias = 2.0 * base.w1_items
    wide = _frame(3, "ideal", correlated=True, service_ns=300.0, clock_bias_items=bias)
    print(base.to_dict(), wide.to_dict())
    assert base.verdict == "rejected" and wide.verdict == "consistent"
    assert wide.threshold_items - base.threshold_items == pytest.approx(bias)
    assert wide.clock_bias_items == bias
    rej = FrameVerdict("rejected", 1.0, 0.1, 0.5, 0.0, 0.5, 39)
    acc = FrameVerdict("consistent", 0.1, 0.1, 0.5, 0.0, 0.5, 39)
    # 1 of 20 at alpha 0.05 is chance (p = 0.64); 4 of 20 is not (p = 0.016).
    assert combine_frames([rej] + [acc] * 19).verdict == "consistent"
    four = combine_frames([rej] * 4 + [acc] * 16)
    print(four.to_dict())
    assert four.verdict == "rejected"
    assert four.p_value == pytest.approx(0.01590, abs=1e-4)


# --- frame start levels ----------------------------------------------------------------------

GOLDEN_BUS = Bus(bulk_size=8, transfer_ns=4000.0, timeout_ns=3000.0)


def _golden_inputs() -> tuple[tuple[F64, F64], tuple[F64, F64]]:
    rng = np.random.default_rng(5)
    gaps, service = rng.exponential(1000.0, 5000), rng.exponential(700.0, 5000)
    return hist(gaps, 64), hist(service, 64)


@pytest.mark.parametrize(
    ("model", "mean", "levels"),
    [("ideal", 1.8039187728411432, 18), ("tandem", 10.709009030031439, 34)],
)
def test_start_levels_zero_reproduce_the_empty_start(
    model: Model, mean: float, levels: int
) -> None:
    """Figures recorded from the estimator (same seed; occupancy counts an item until its
    removal, i.e. its service start): starting with 0 items reproduces them, and passing the
    zeros explicitly changes nothing."""
    h_in, h_out = _golden_inputs()
    bus = GOLDEN_BUS if model == "tandem" else None
    runs = [
        predict(
            h_in,
            h_out,
            2.0e6,
            np.random.default_rng(99),
            model=model,
            bus=bus,
            replications=3,
            **kw,
        )
        for kw in ({}, {"start_tail": 0, "start_head": 0})
    ]
    assert runs[0] == runs[1]
    assert runs[0].items_simulated == 6047
    assert len(runs[0].whole) == levels
    assert runs[0].mean_occupancy == pytest.approx(mean, rel=1e-12)


def test_simulate_frame_drains_the_start_items() -> None:
    """No insertions in the frame; service 100 ns each; an item leaves the queue when its
    service starts. "ideal": the 2 + 1 start items are removed at 0, 100, 200. "tandem": the
    head item is removed at once (served 0..100); the 2 tail items wait for the inactivity flush
    at 10 ns (quorum 4 never met), ride 10..60, then are removed at 100 and 200."""
    gaps, service = np.array([1e9]), np.full(4, 100.0)
    ideal = simulate_frame(gaps, service, 1000.0, "ideal", start_tail=2, start_head=1)
    np.testing.assert_allclose(ideal.whole, [800.0, 100.0, 100.0])
    np.testing.assert_allclose(ideal.tail, [1000.0])
    bus = Bus(bulk_size=4, transfer_ns=50.0, timeout_ns=10.0)
    t = simulate_frame(gaps, service, 1000.0, "tandem", bus, start_tail=2, start_head=1)
    np.testing.assert_allclose(t.whole, [800.0, 100.0, 100.0])
    np.testing.assert_allclose(t.tail, [990.0, 0.0, 10.0])
    # head: empty until 60, 2 items over [60, 100), 1 over [100, 200), empty again from 200
    np.testing.assert_allclose(t.head, [860.0, 100.0, 40.0])


def test_start_levels_raise_early_occupancy() -> None:
    """A frame that starts with a backlog is predicted fuller early on than one from empty."""
    rng = np.random.default_rng(8)
    gaps, service = source(rng, 600.0, 5000)
    h_in, h_out = hist(gaps), hist(service)
    bus = Bus(bulk_size=8, transfer_ns=4000.0, timeout_ns=5000.0, capacity2=64)
    short = 3.0e5  # early in the frame: ~300 insertions, the backlog drains over ~1e5 ns
    for model, b in (("ideal", None), ("tandem", bus)):
        empty = predict(h_in, h_out, short, rng, model=model, bus=b)
        full = predict(h_in, h_out, short, rng, model=model, bus=b, start_tail=30, start_head=30)
        m_tail = [float(np.arange(len(p.tail)) @ np.asarray(p.tail)) for p in (empty, full)]
        m_head = [float(np.arange(len(p.head)) @ np.asarray(p.head)) for p in (empty, full)]
        print(
            f"{model}: mean from empty {empty.mean_occupancy:.2f}, from 30+30 "
            f"{full.mean_occupancy:.2f}; tail {m_tail}; head {m_head}"
        )
        assert full.mean_occupancy > empty.mean_occupancy + 5.0
        assert m_head[1] > m_head[0] + 2.0
        if model == "tandem":  # the tail's backlog leaves in a few transfers: a smaller rise
            assert m_tail[1] > m_tail[0] + 0.3


@pytest.mark.parametrize("model", ["ideal", "tandem"])
def test_self_check_needs_the_start_levels(model: Model) -> None:
    """Frames that start with 30 + 30 items: consistent when the check is told so, rejected
    when they are modelled as starting empty."""
    bus = Bus(bulk_size=8, transfer_ns=4000.0, timeout_ns=5000.0, capacity2=64)
    b = bus if model == "tandem" else None
    frame = 3.0e5
    given, empty = 0, 0
    for seed in range(10):
        rng = np.random.default_rng(300 + seed)
        gaps, service = source(rng, 600.0, 700)
        truth = simulate_frame(gaps, service, frame, model, b, start_tail=30, start_head=30)
        args = (hist(gaps), hist(service), frame, truth.tail, truth.head, rng)
        v = self_check(*args, model=model, bus=b, start_tail=30, start_head=30)
        given += v.verdict == "consistent"
        empty += self_check(*args, model=model, bus=b).verdict == "rejected"
    print(
        f"{model}: start levels given: {given}/10 consistent; modelled empty: {empty}/10 rejected"
    )
    assert given >= 8
    assert empty >= 9


def test_start_levels_and_service_checked() -> None:
    gaps, service = np.full(10, 100.0), np.full(10, 50.0)
    with pytest.raises(ModelInputError, match="start_tail"):
        simulate_frame(gaps, service, 500.0, "ideal", start_tail=-1)
    with pytest.raises(ModelInputError, match="service: need"):
        simulate_frame(gaps, service, 2000.0, "ideal", start_head=3)


# --- bus latency and head-side capacity ------------------------------------------------------


def test_bus_latency_adds_latency_times_throughput() -> None:
    """Pipelined latency with an unbounded head buffer delays every item by exactly the
    latency (the bus is unaffected), so the whole queue's mean grows by lambda * latency."""
    rng = np.random.default_rng(21)
    gaps, service = source(rng, 500.0, int(FRAME_NS / GAP_NS * 1.3))
    lat = 5000.0
    base = simulate_frame(gaps, service, FRAME_NS, "tandem", BUS)
    late = simulate_frame(
        gaps, service, FRAME_NS, "tandem", Bus(32, 20_000.0, 100_000.0, latency_ns=lat)
    )
    n = int(np.searchsorted(np.cumsum(gaps), FRAME_NS))

    def mean(x: F64) -> float:
        return float(np.arange(x.size) @ x / x.sum())

    np.testing.assert_allclose(late.tail, base.tail)
    grow = mean(late.whole) - mean(base.whole)
    print(f"mean whole grows by {grow:.4f}, lambda * latency = {n * lat / FRAME_NS:.4f}")
    assert grow == pytest.approx(n * lat / FRAME_NS, rel=0.01)


def test_bus_capacity2_bounds_the_head_and_backs_up_the_tail() -> None:
    rng = np.random.default_rng(22)
    gaps, service = source(rng, 900.0, int(FRAME_NS / GAP_NS * 1.3))  # head server at 0.9
    small = Bus(bulk_size=8, transfer_ns=2000.0, timeout_ns=5000.0, latency_ns=3000.0, capacity2=8)
    free = Bus(bulk_size=8, transfer_ns=2000.0, timeout_ns=5000.0, latency_ns=3000.0)
    held = simulate_frame(gaps, service, FRAME_NS, "tandem", small)
    loose = simulate_frame(gaps, service, FRAME_NS, "tandem", free)

    def mean(x: F64) -> float:
        return float(np.arange(x.size) @ x / x.sum())

    print(
        f"capacity2=8: tail mean {mean(held.tail):.2f} head max {held.head.size - 1}; "
        f"unbounded: tail mean {mean(loose.tail):.2f} head max {loose.head.size - 1}"
    )
    assert held.head.size - 1 <= 8 + 1
    assert loose.head.size - 1 > 8 + 1
    assert mean(held.tail) > mean(loose.tail)
    with pytest.raises(ModelInputError, match="capacity2"):
        simulate_frame(gaps, service, FRAME_NS, "tandem", Bus(8, 2000.0, capacity2=4))


def test_a_frame_starts_at_an_arbitrary_instant_of_the_insertions() -> None:
    """Gaps of 4 frames: a frame sees an insertion with probability 1/4 (the equilibrium
    residual), not never (a whole gap from the frame's start)."""
    from streamscope.model.estimator import replicate
    from streamscope.model.sampling import sample_residual

    gaps = (np.array([3.9e6, 4.1e6]), np.ones(1))
    service = (np.array([0.0, 1.0]), np.ones(1))
    rng = np.random.default_rng(7)
    seen = [replicate(gaps, service, 1.0e6, "ideal", None, rng)[1] for _ in range(4000)]
    assert np.mean(np.array(seen) > 0) == pytest.approx(0.25, abs=0.03)
    whole = [
        replicate(gaps, service, 1.0e6, "ideal", None, rng, residual=False)[1] for _ in range(200)
    ]
    assert sum(whole) == 0
    # residual of exponential gaps: exponential with the same mean (memoryless)
    exp = hist(np.random.default_rng(3).exponential(1000.0, 200_000), 400)
    draws = [sample_residual(exp, rng) for _ in range(20_000)]
    assert np.mean(draws) == pytest.approx(1000.0, rel=0.05)


def test_a_renewal_replication_of_a_frame_its_producer_stopped_in_inserts_nothing_after() -> None:
    """Without a profile, the frame a producer finished in (its side measured the first fifth
    of it) gets i.i.d. gaps up to the end of that window and none after: the run's last frame,
    or one a device's source stopped in while the run went on."""
    from streamscope.model.estimator import replicate

    gaps = (np.array([500.0, 1500.0]), np.array([1.0]))  # uniform 0.5-1.5 us, mean 1 us
    service = (np.array([100.0, 200.0]), np.array([1.0]))
    bus = Bus(bulk_size=4, transfer_ns=100.0, timeout_ns=1000.0)
    frame, window = 1_000_000.0, 200_000.0
    stopped, n_stopped = replicate(gaps, service, frame, "tandem", bus, np.random.default_rng(3),
                                   windows=(window, frame), ended=True)  # fmt: skip
    going, n_going = replicate(gaps, service, frame, "tandem", bus, np.random.default_rng(3),
                               windows=(window, frame))  # fmt: skip
    assert 180 <= n_stopped <= 220  # ~200 in the producer's 200 us, none after
    assert 900 <= n_going <= 1100  # the stream going on: ~1000 over the frame
    assert len(stopped.whole) >= 1 and len(going.whole) >= 1


def test_w1_and_tv_pad_the_shorter_levels_with_zeros_as_np_pad() -> None:
    """The distances pad the shorter weighting with zeros (no np.pad: ~80 a frame), to the
    same bits as padding with np.pad and normalising."""
    from streamscope.model.occupancy import tv

    rng = np.random.default_rng(11)
    for _ in range(300):
        p, q = rng.random(int(rng.integers(1, 40))), rng.random(int(rng.integers(1, 40)))
        n = max(p.size, q.size)
        pa, qa = np.pad(p, (0, n - p.size)), np.pad(q, (0, n - q.size))
        pa, qa = pa / float(pa.sum()), qa / float(qa.sum())
        assert w1_items(p, q) == float(np.abs(np.cumsum(pa) - np.cumsum(qa)).sum())
        assert tv(p, q) == 0.5 * float(np.abs(pa - qa).sum())
