"""The insertion profile in the model: sampling insertions per sub-window, the "profile" arrival
model against the paper's renewal model on bursty sources, and the dependence test that gives the
renewal model's self-check its power (seeded sources in, rejection rates and W1 out)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray

from streamscope.model import (
    Bus,
    Dependence,
    DependencePool,
    FrameVerdict,
    ModelInputError,
    Profile,
    combine_frames,
    condition,
    dependence_test,
    predict,
    sample_profile,
    self_check,
    simulate_frame,
    w1_items,
)
from streamscope.model.estimator import replicates

F64 = NDArray[np.float64]
FRAME_NS = 2.0e8  # 200 ms
K = 128  # sub-windows of the profile
WIDTH = FRAME_NS / K
MEAN_NS = 1.0e6 / 0.6  # mean gap: rho 0.6 against a 1 ms server
SERVICE_NS = 1.0e6
BUS = Bus(bulk_size=16, transfer_ns=400_000.0, timeout_ns=8.0e6, latency_ns=100_000.0)
EDGES = np.concatenate(([0.0], 2.0 ** (np.arange(8 * 42 + 1) / 8)))  # the device's gap bins

Source = Callable[[np.random.Generator, int], F64]


def _exp(rng: np.random.Generator, n: int) -> F64:
    return rng.exponential(MEAN_NS, n)


def _h2(rng: np.random.Generator, n: int) -> F64:
    p = 0.5 * (1.0 + np.sqrt(3.0 / 5.0))  # balanced means, CV^2 = 4
    fast = rng.random(n) < p
    return rng.exponential(1.0, n) * np.where(fast, MEAN_NS / (2 * p), MEAN_NS / (2 * (1 - p)))


def _det(rng: np.random.Generator, n: int) -> F64:
    return np.full(n, MEAN_NS)


def _lognormal(rng: np.random.Generator, n: int) -> F64:
    return MEAN_NS * np.exp(rng.standard_normal(n) - 0.5)


def _onoff(rng: np.random.Generator, n: int, burst: int = 60, rho: float = 0.2) -> F64:
    """Bursts of ``burst`` items, idle gaps (~280 ms) longer than a frame between them."""
    mean = 1.0e6 / rho
    g = rng.exponential(mean / 16.0, n)
    first = np.arange(n) % burst == 0
    g[first] = rng.exponential(burst * mean - (burst - 1) * mean / 16.0, int(first.sum()))
    return g


def _periodic(rng: np.random.Generator, n: int, burst: int = 24) -> F64:
    inner = rng.exponential(MEAN_NS / 8.0, (-(-n // burst), burst))
    inner[:, 0] = 0.0
    t = (np.arange(n) // burst) * (burst * MEAN_NS) + np.cumsum(inner, axis=1).ravel()[:n]
    return np.diff(t, prepend=0.0)


def _mmpp(rng: np.random.Generator, n: int) -> F64:
    rates, stays = (2.4 / MEAN_NS, 0.15 / MEAN_NS), (25 * MEAN_NS, 25 * MEAN_NS * 1.4 / 0.85)
    out, state, left, gap, k = np.empty(n), 0, rng.exponential(stays[0]), 0.0, 0
    while k < n:  # test-only generator: each draw depends on the state
        g = rng.exponential(1.0 / rates[state])
        if g < left:
            left, out[k], gap, k = left - g, gap + g, 0.0, k + 1
        else:
            gap, state = gap + left, 1 - state
            left = rng.exponential(stays[state])
    return out


def _ar1(rng: np.random.Generator, n: int, phi: float = 0.9) -> F64:
    z = np.empty(n)
    z[0] = rng.standard_normal()
    e = rng.standard_normal(n) * np.sqrt(1 - phi * phi)
    for k in range(1, n):  # test-only generator
        z[k] = phi * z[k - 1] + e[k]
    return MEAN_NS * np.exp(z - 0.5)


RENEWAL: dict[str, Source] = {"exp": _exp, "h2": _h2, "det": _det, "lognormal": _lognormal}
DEPENDENT: dict[str, Source] = {"onoff": _onoff, "periodic": _periodic, "mmpp": _mmpp, "ar1": _ar1}


def frames(src: Source, seed: int, n_frames: int) -> list[tuple[tuple[F64, F64], F64, F64]]:
    """Per frame of a seeded source: its gap histogram (on the device's bins), its insertion
    profile, and its insertion times from the frame start."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(src(rng, int((n_frames + 1) * FRAME_NS / MEAN_NS) + 200))
    out = []
    for f in range(1, n_frames + 1):  # frame 0 would start with the source
        lo = f * FRAME_NS
        i = np.flatnonzero((t >= lo) & (t < lo + FRAME_NS))
        if i.size < 2:
            continue
        j = i[i > 0]  # the gap before each insertion (the first has none before it)
        h = np.bincount(np.searchsorted(EDGES, t[j] - t[j - 1], side="right") - 1, minlength=337)
        nz = np.flatnonzero(h)
        hist = (EDGES[nz[0] : nz[-1] + 2], h[nz[0] : nz[-1] + 1].astype(np.float64))
        out.append(
            (hist, np.bincount(((t[i] - lo) // WIDTH).astype(np.int64), minlength=K), t[i] - lo)
        )
    return out


# ---- sampling ---------------------------------------------------------------------------------


def test_sample_profile_places_exactly_the_measured_counts() -> None:
    rng = np.random.default_rng(1)
    counts = np.array([3, 0, 0, 7, 1, 0, 12], dtype=np.int64)
    for h in [(np.array([0.0, 5.0, 20.0]), np.array([1.0, 3.0])), (EDGES[:20], np.ones(19))]:
        t = sample_profile(h, Profile(counts, 50.0), rng)
        assert np.all(np.diff(t) >= 0.0)
        assert np.bincount((t // 50.0).astype(np.int64), minlength=7).tolist() == counts.tolist()
    assert sample_profile((np.array([0.0, 1.0]), np.ones(1)), Profile(np.zeros(4, np.int64), 1.0),
                          rng).size == 0  # fmt: skip
    h = (np.array([0.0, 100.0]), np.ones(1))
    s = (np.array([0.0, 50.0]), np.ones(1))
    assert predict(h, s, 700.0, rng, profile=Profile(counts, 100.0)).arrivals == "profile"
    assert predict(h, s, 700.0, rng).arrivals == "renewal"


def test_constant_gaps_are_evenly_spaced_and_exponential_ones_uniform() -> None:
    rng = np.random.default_rng(2)
    even = sample_profile((np.array([10.0, 10.0 + 1e-9]), np.ones(1)), Profile(np.array([3]), 40.0),
                          rng)  # fmt: skip
    assert np.allclose(even, [10.0, 20.0, 30.0])
    e = np.linspace(0.0, 50.0, 501)
    w = np.exp(-0.5 * (e[:-1] + e[1:]) / 5.0)
    t = sample_profile((e, w), Profile(np.full(2000, 5, np.int64), 100.0), rng)
    within = (t % 100.0) / 100.0  # given its count, a Poisson process is uniform in a window
    assert abs(within.mean() - 0.5) < 0.01 and abs(within.var() - 1 / 12) < 0.005


def test_gaps_longer_than_a_sub_window_are_not_drawn_inside_one() -> None:
    """An idle gap of 1000 ns beside 1 ns gaps: within a 100 ns sub-window, only the short ones
    space the items (else one long draw would push them all to the window's edges)."""
    rng = np.random.default_rng(3)
    h = (np.array([0.5, 1.5, 999.0, 1001.0]), np.array([50.0, 0.0, 1.0]))
    t = sample_profile(h, Profile(np.array([10]), 100.0), rng)
    assert np.all(np.abs(np.diff(t) - 100.0 / 11.0) < 5.0)


def test_profile_is_checked() -> None:
    h = (np.array([0.0, 1.0]), np.ones(1))
    rng = np.random.default_rng(0)
    for bad in (Profile(np.array([1, -1]), 1.0), Profile(np.array([0.5]), 1.0),
                Profile(np.zeros(0, np.int64), 1.0), Profile(np.array([1]), 0.0)):  # fmt: skip
        with pytest.raises(ModelInputError, match="profile"):
            sample_profile(h, bad, rng)


def test_simulate_frame_windows_each_side_its_own() -> None:
    rng = np.random.default_rng(4)
    gaps, service = rng.exponential(100.0, 400), rng.exponential(80.0, 400)
    full = simulate_frame(gaps, service, 20_000.0, "tandem", Bus(4, 50.0, 500.0))
    part = simulate_frame(gaps, service, 20_000.0, "tandem", Bus(4, 50.0, 500.0),
                          windows=(12_000.0, 5_000.0))  # fmt: skip
    assert np.array_equal(full.whole, part.whole)
    assert part.tail.sum() == pytest.approx(12_000.0) and part.head.sum() == pytest.approx(5_000.0)
    ideal = simulate_frame(gaps, service, 20_000.0, "ideal", windows=(3.0, 7_000.0))
    assert ideal.tail.tolist() == [3.0] and ideal.head.sum() == pytest.approx(7_000.0)
    with pytest.raises(ModelInputError, match="windows"):
        simulate_frame(gaps, service, 20_000.0, "ideal", windows=(0.0, 1.0))


# ---- the profile model against the renewal model ------------------------------------------------


def _truth_and_models(src: Source, seed: int) -> list[tuple[float, float, float]]:
    """Per frame: the true mean occupancy (the frame replayed with its own insertion and
    service times), W1 to it of the profile model's estimate (its replications nearest the
    frame's tail and head, as a virtual queue takes it) and of the renewal model's prediction."""
    out = []
    for f, (hist, prof, times) in enumerate(frames(src, seed, 6)):
        rng = np.random.default_rng((seed, f))
        service = rng.exponential(SERVICE_NS, times.size)
        real = simulate_frame(np.diff(times, prepend=0.0), service, FRAME_NS, "tandem", BUS)
        true = real.whole / real.whole.sum()
        svc = (np.linspace(0.0, 8e6, 81), np.exp(-np.linspace(0.05, 7.95, 80)))
        runs = replicates(hist, svc, FRAME_NS, "tandem", BUS, rng, 48, profile=Profile(prof, WIDTH))
        prof_pred = condition(runs, real.tail, real.head, 12, "tandem", "profile")
        ren_pred = predict(hist, svc, FRAME_NS, rng, model="tandem", bus=BUS)
        out.append(
            (float(np.dot(np.arange(true.size), true)),
             w1_items(prof_pred.whole, true), w1_items(ren_pred.whole, true))
        )  # fmt: skip
    return out


@pytest.mark.parametrize("kind", ["onoff", "periodic", "mmpp", "ar1", "exp"])
def test_the_profile_model_follows_sources_the_renewal_model_gets_wrong(kind: str) -> None:
    rows = [r for seed in (1, 2) for r in _truth_and_models({**DEPENDENT, **RENEWAL}[kind], seed)]
    truth = np.mean([r[0] for r in rows])
    profile_w1, renewal_w1 = np.mean([r[1] for r in rows]), np.mean([r[2] for r in rows])
    print(f"{kind}: true mean {truth:.2f}, W1/true profile {profile_w1 / truth:.3f}, "
          f"renewal {renewal_w1 / truth:.3f}")  # fmt: skip
    assert profile_w1 <= 0.15 * truth
    if kind != "exp":
        assert renewal_w1 > 2.0 * profile_w1 and renewal_w1 > 0.2 * truth


# ---- the dependence test ----------------------------------------------------------------------


def _rejected(src: Source, seeds: range, n_frames: int) -> tuple[float, list[bool]]:
    """Share of frames whose dependence test rejects at 0.025, and per seed whether the frames
    pooled reject at 0.025."""
    per_frame, pooled = [], []
    for seed in seeds:
        pool = DependencePool()
        for f, (hist, prof, _) in enumerate(frames(src, seed, n_frames)):
            d = dependence_test(hist, Profile(prof, WIDTH), FRAME_NS,
                                np.random.default_rng((seed, f)), pool=pool)  # fmt: skip
            if d is not None:
                per_frame.append(d.p_value < 0.025)
        r = pool.result()
        pooled.append(r is not None and r.p_value < 0.025)
    return float(np.mean(per_frame)), pooled


@pytest.mark.parametrize("kind", sorted(RENEWAL))
def test_dependence_test_accepts_renewal_sources(kind: str) -> None:
    frame_rate, pooled = _rejected(RENEWAL[kind], range(1, 7), 8)
    print(f"{kind}: frames rejected {frame_rate:.0%}, runs rejected pooled {np.mean(pooled):.0%}")
    assert frame_rate <= 0.1
    assert sum(pooled) <= 1


@pytest.mark.parametrize("kind", sorted(DEPENDENT))
def test_dependence_test_rejects_dependent_gaps(kind: str) -> None:
    """Periodic bursts and AR(1) gaps show in almost every frame; on/off bursts (one burst a
    frame at most: its size cannot be told from a geometric one's) and slow Markov modulation
    only once a run's frames are pooled (here ~5 s of them: 16 bursts)."""
    frame_rate, pooled = _rejected(DEPENDENT[kind], range(1, 7), 24)  # ~5 s of frames
    print(f"{kind}: frames rejected {frame_rate:.0%}, runs rejected pooled {np.mean(pooled):.0%}")
    if kind in ("periodic", "ar1"):
        assert frame_rate >= 0.8
    assert sum(pooled) >= 5


def test_dependence_test_needs_sub_windows() -> None:
    h = (np.array([0.0, 10.0]), np.ones(1))
    rng = np.random.default_rng(0)
    assert dependence_test(h, Profile(np.ones(7, np.int64), 1.0), 7.0, rng) is None
    # a frame covering part of its profile is tested on that part only
    assert dependence_test(h, Profile(np.ones(64, np.int64), 1.0), 4.0, rng) is None
    assert dependence_test(h, Profile(np.ones(64, np.int64), 1.0), 64.0, rng) is not None


# ---- the self-check and the run's verdict ---------------------------------------------------------


def test_self_check_of_each_arrival_model() -> None:
    (hist, prof, times), *_ = frames(_periodic, 5, 1)
    svc = (np.linspace(0.0, 8e6, 81), np.exp(-np.linspace(0.05, 7.95, 80)))
    rng = np.random.default_rng(6)
    service = rng.exponential(SERVICE_NS, times.size)
    real = simulate_frame(np.diff(times, prepend=0.0), service, FRAME_NS, "tandem", BUS)
    common = {"model": "tandem", "bus": BUS, "profile": Profile(prof, WIDTH)}
    v = self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, arrivals="profile", **common)  # type: ignore[arg-type]
    assert v.verdict == "consistent" and v.dependence is None
    r = self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, arrivals="renewal", **common)  # type: ignore[arg-type]
    assert r.verdict == "rejected" and r.dependence is not None and r.dependence.p_value < 0.025
    assert r.to_dict()["dependence"]["p_value"] == r.dependence.p_value
    with pytest.raises(ModelInputError, match="profile"):
        self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, arrivals="profile")
    with pytest.raises(ModelInputError, match="arrivals"):
        self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, arrivals="poisson")  # type: ignore[arg-type]


def test_a_run_is_rejected_by_its_pooled_dependence_test() -> None:
    ok = FrameVerdict("consistent", 0.1, 0.01, 1.0, 0.0, 1.0, 39)
    frames_ = [ok] * 10
    assert combine_frames(frames_, 0.05).verdict == "consistent"
    assert combine_frames(frames_, 0.05, Dependence(9.0, 0.01, 7, 99)).verdict == "rejected"
    assert combine_frames(frames_, 0.05, Dependence(2.0, 0.04, 7, 99)).verdict == "consistent"
    run = combine_frames(frames_, 0.05, Dependence(9.0, 0.01, 7, 99))
    assert run.to_dict()["dependence"] == {
        "statistic": 9.0, "p_value": 0.01, "scales": 7, "null_replications": 99,
    }  # fmt: skip


def test_replications_serve_as_prediction_and_null() -> None:
    """Each replication scored against the mean of the others is a null like fresh ones: the
    model's own output is rejected about alpha of the time (here over 40 frames)."""
    svc = (np.linspace(0.0, 8e6, 81), np.exp(-np.linspace(0.05, 7.95, 80)))
    rejected = 0
    fr = [f for seed in (1, 2, 3, 4, 5) for f in frames(_mmpp, seed, 8)][:40]
    for i, (hist, prof, _) in enumerate(fr):
        rng = np.random.default_rng(i)
        profile = Profile(prof, WIDTH)
        (real, _), *_ = replicates(hist, svc, FRAME_NS, "tandem", BUS, rng, 1, profile=profile)
        runs = replicates(hist, svc, FRAME_NS, "tandem", BUS, rng, 39, profile=profile)
        v = self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, model="tandem", bus=BUS,
                       profile=profile, arrivals="profile", runs=runs)  # fmt: skip
        assert v.null_replications == 39
        rejected += v.verdict == "rejected"
    assert rejected <= 5
    with pytest.raises(ModelInputError, match="runs"):
        self_check(hist, svc, FRAME_NS, real.tail, real.head, rng, runs=runs[:1])
