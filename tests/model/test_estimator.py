"""Virtual-queue estimator and its self-check: seeded i.i.d., correlated and bus-bound sources in,
agreement with M/M/1 theory, acceptance/rejection rates and W1 gaps out (figures printed)."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.typing import NDArray

from streamscope.model import (
    Bus,
    FrameVerdict,
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
    theory = rho / (1 - rho)
    pred = predict(hist(gaps), hist(service), 1.0e8, rng, model="ideal", replications=4)
    err = pred.mean_occupancy / theory - 1
    print(f"rho={rho:.4f} L theory={theory:.4f} predicted={pred.mean_occupancy:.4f} err={err:+.2%}")
    assert pred.items_simulated > 350_000
    assert pred.host == (1.0,)
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
        truth.host,
        truth.device,
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
    verdict = self_check(h_in, h_out, FRAME_NS, truth.host, truth.device, rng, model="ideal")
    print(verdict.to_dict())
    assert verdict.verdict == "rejected"


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
