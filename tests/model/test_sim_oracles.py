"""The queue models against queueing theory: M/M/1, M/D/1 (Pollaczek–Khinchine), M/M/1/(C+2),
bulk service (CTMC and Bailey's root), two-station tandem with blocking (CTMC), Little's law.

Time-weighted occupancy distributions are compared by mean and Wasserstein-1 (items).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from numpy.typing import NDArray
from scipy import linalg, optimize, stats

from streamscope.model import (
    blocking_fifo,
    bulk_transfer,
    lindley_fifo,
    occupancy_from_events,
    tandem_blocking,
    tandem_bulk,
    w1_items,
)

F64 = NDArray[np.float64]
WARM = 10_000  # customers dropped from the front of every window (start-up transient)


def dist(arrive: F64, depart: F64, t0: float, t1: float) -> F64:
    """Normalised time-weighted level distribution over [t0, t1)."""
    _, ns = occupancy_from_events(arrive, depart, t0, t1)
    return ns / ns.sum()


def mean(p: F64) -> float:
    return float(np.arange(p.size) @ p)


def report(name: str, sim: F64, ref: F64) -> tuple[float, float, float]:
    m_sim, m_ref, w = mean(sim), mean(ref), w1_items(sim, ref)
    print(f"{name}: mean sim {m_sim:.4f} ref {m_ref:.4f} ({m_sim / m_ref - 1:+.2%}) W1 {w:.4f}")
    return m_sim, m_ref, w


def stationary(q: F64) -> F64:
    """pi with pi Q = 0, sum pi = 1, for a finite irreducible generator Q."""
    a = q.T.copy()
    a[-1, :] = 1.0
    rhs = np.zeros(q.shape[0])
    rhs[-1] = 1.0
    return np.asarray(linalg.solve(a, rhs), dtype=np.float64)


# --- M/M/1 and M/D/1 -------------------------------------------------------------------------


@pytest.mark.parametrize("rho", [0.5, 0.8])
def test_lindley_mm1_matches_geometric(rho: float) -> None:
    """Number in system (waiting + in service), time-weighted: p_n = (1 - rho) rho^n."""
    rng = np.random.default_rng(11)
    n = 1_000_000
    arrive = np.cumsum(rng.exponential(1.0, n))
    depart = lindley_fifo(arrive, rng.exponential(rho, n))
    sim = dist(arrive, depart, arrive[WARM], arrive[-1])
    ref = (1 - rho) * rho ** np.arange(200)
    m_sim, m_ref, w = report(f"M/M/1 rho={rho}", sim, ref)
    assert abs(m_sim / m_ref - 1) < 0.03
    assert w < 0.03 * m_ref


def md1_distribution(rho: float, levels: int = 400) -> F64:
    """Exact M/D/1 number-in-system distribution (service 1, arrival rate rho).

    Embedded chain at departures: X' = max(X - 1, 0) + A, A ~ Poisson(rho) arrivals per
    service, solved as a truncated linear system. For M/G/1 the departure-epoch distribution
    equals the arrival-epoch one (level crossing), which equals the time average (PASTA).
    """
    a = stats.poisson.pmf(np.arange(levels), rho)
    p = np.zeros((levels, levels))
    for i in range(levels):
        base = max(i - 1, 0)
        p[i, base:] = a[: levels - base]
        p[i, -1] += 1.0 - p[i].sum()  # fold the truncated tail into the last level
    return stationary(p - np.eye(levels))


def test_lindley_md1_matches_pollaczek_khinchine() -> None:
    rho = 0.8
    rng = np.random.default_rng(12)
    n = 1_000_000
    arrive = np.cumsum(rng.exponential(1.0 / rho, n))
    depart = lindley_fifo(arrive, np.ones(n))
    sim = dist(arrive, depart, arrive[WARM], arrive[-1])
    ref = md1_distribution(rho)
    pk = rho + rho**2 / (2 * (1 - rho))
    assert mean(ref) == pytest.approx(pk, rel=1e-9)  # the numeric chain agrees with P–K
    m_sim, _, w = report("M/D/1 rho=0.8", sim, ref)
    assert abs(m_sim / pk - 1) < 0.03
    assert w < 0.03 * pk


# --- blocking producer = M/M/1/(C+2) ---------------------------------------------------------


@pytest.mark.parametrize("capacity", [1, 2, 4])
def test_blocking_fifo_is_mm1k(capacity: int) -> None:
    """Buffer + server + the item held by the blocked producer: M/M/1/K with K = C + 2."""
    rng = np.random.default_rng(20 + capacity)
    n, rho = 300_000, 0.8
    gaps = rng.exponential(1.0, n)
    insert, _, depart = blocking_fifo(gaps, rng.exponential(rho, n), capacity)
    ready = np.concatenate(([0.0], insert[:-1])) + gaps
    sim = dist(ready, depart, ready[WARM], ready[-1])
    k = capacity + 2
    ref = rho ** np.arange(k + 1)
    ref /= ref.sum()
    _, _, w = report(f"blocking C={capacity} vs M/M/1/{k}", sim, ref)
    assert sim.size == k + 1
    assert w < 0.02
    assert np.abs(sim - ref).max() < 0.01


# --- bulk service ----------------------------------------------------------------------------


def bulk_ctmc(lam: float, mu: float, lo: int, b: int, top: int = 400) -> tuple[F64, float]:
    """Host-buffer length distribution and P(bus busy) of the M/M^(a,b)/1 queue, a = lo.

    States (q waiting, bus idle/busy), q < top; the bus starts when q reaches a and carries
    min(q, b); transfers are exponential(mu) whatever their size.
    """
    idx: dict[tuple[int, int], int] = {}
    for q in range(top):
        for busy in (0, 1):
            if busy or q < lo:
                idx[q, busy] = len(idx)
    g = np.zeros((len(idx), len(idx)))
    for (q, busy), i in idx.items():
        moves: list[tuple[tuple[int, int], float]] = []
        if busy:
            if q + 1 < top:
                moves.append(((q + 1, 1), lam))
            moves.append(((q - min(q, b), 1) if q >= lo else (q, 0), mu))
        else:
            moves.append(((q + 1 - min(q + 1, b), 1) if q + 1 >= lo else (q + 1, 0), lam))
        for state, rate in moves:
            g[i, idx[state]] += rate
            g[i, i] -= rate
    pi = stationary(g)
    out = np.zeros(top)
    busy_p = 0.0
    for (q, busy), i in idx.items():
        out[q] += pi[i]
        busy_p += busy * pi[i]
    return out, busy_p


def simulate_bulk(lo: int, b: int, seed: int) -> tuple[F64, float, float, float]:
    rng = np.random.default_rng(seed)
    n, lam, mu = 1_000_000, 1.0, 1.0 / 2.4  # load lam / (b mu) = 0.6
    arrive = np.cumsum(rng.exponential(1.0 / lam, n))
    start, done = bulk_transfer(arrive, b, rng.exponential(1.0 / mu, n), min_batch=lo)
    t0, t1 = arrive[WARM], arrive[-1]
    host = dist(arrive, start, t0, t1)
    # Bus busy fraction: the union of transfer intervals, one per batch.
    first = np.flatnonzero(np.diff(start, prepend=-1.0) > 0)
    s, d = np.clip(start[first], t0, t1), np.clip(done[first], t0, t1)
    return host, float((d - s).sum() / (t1 - t0)), lam, mu


def test_bulk_quorum_matches_ctmc() -> None:
    """No late entry, a = b = 4: the bus waits for 4 items and carries exactly 4."""
    b = 4
    host, busy, lam, mu = simulate_bulk(b, b, seed=31)
    ref, busy_ref = bulk_ctmc(lam, mu, b, b)
    m_sim, m_ref, w = report("bulk a=b=4 host buffer vs CTMC", host, ref)
    print(f"  bus busy sim {busy:.4f} ref {busy_ref:.4f}")
    assert abs(m_sim / m_ref - 1) < 0.02
    assert w < 0.02 * m_ref
    assert busy == pytest.approx(busy_ref, abs=0.005)


def bailey_waiting_line(lam: float, mu: float, b: int, top: int = 400) -> F64:
    """Waiting-line distribution of M/M^(1,b)/1 (Bailey 1954, JRSS B 16; Gross & Harris,
    *Fundamentals of Queueing Theory*, §3.3.2 "bulk service").

    r is the root in (0, 1) of ``mu r^(b+1) - (lam + mu) r + lam = 0``. Keeping the idle bus
    apart from "busy, nobody waiting", the balance equations give P(Q = n) = c r^n for n >= 1
    and P(Q = 0) = c (1 + mu / lam), with c = 1 / (1 / (1 - r) + mu / lam).
    """
    r = optimize.brentq(lambda x: mu * x ** (b + 1) - (lam + mu) * x + lam, 0.0, 1.0 - 1e-9)
    c = 1.0 / (1.0 / (1.0 - r) + mu / lam)
    out = c * r ** np.arange(top)
    out[0] = c * (1.0 + mu / lam)
    return np.asarray(out, dtype=np.float64)


def test_bulk_greedy_matches_bailey_root() -> None:
    """a = 1, b = 4: the bus leaves with whatever waits (up to 4) as soon as it is free."""
    b = 4
    host, _, lam, mu = simulate_bulk(1, b, seed=32)
    ref = bailey_waiting_line(lam, mu, b)
    ctmc, _ = bulk_ctmc(lam, mu, 1, b)
    assert w1_items(ref, ctmc) < 1e-9  # the closed form and the numeric chain agree
    m_sim, m_ref, w = report("bulk a=1 b=4 host buffer vs Bailey root", host, ref)
    assert abs(m_sim / m_ref - 1) < 0.02
    assert w < 0.02 * m_ref


# --- tandem with blocking --------------------------------------------------------------------


def tandem_ctmc(lam: float, mu1: float, mu2: float, cap: int, top: int = 120) -> tuple[F64, F64]:
    """Marginals of n1 (station 1 incl. a blocked item) and n2 (buffer + server 2).

    States (n1 < top, n2 <= cap + 1, blocked); blocked only when n1 >= 1 and n2 = cap + 1.
    """
    full = cap + 1
    idx: dict[tuple[int, int, int], int] = {}
    for n1 in range(top):
        for n2 in range(full + 1):
            for blk in (0, 1):
                if not blk or (n1 >= 1 and n2 == full):
                    idx[n1, n2, blk] = len(idx)
    g = np.zeros((len(idx), len(idx)))
    for (n1, n2, blk), i in idx.items():
        moves: list[tuple[tuple[int, int, int], float]] = []
        if n1 + 1 < top:
            moves.append(((n1 + 1, n2, blk), lam))
        if n1 >= 1 and not blk:
            moves.append(((n1 - 1, n2 + 1, 0) if n2 < full else (n1, n2, 1), mu1))
        if n2 >= 1:
            moves.append(((n1 - 1, n2, 0) if blk else (n1, n2 - 1, 0), mu2))
        for state, rate in moves:
            g[i, idx[state]] += rate
            g[i, i] -= rate
    pi = stationary(g)
    p1, p2 = np.zeros(top), np.zeros(full + 1)
    for (n1, n2, _), i in idx.items():
        p1[n1] += pi[i]
        p2[n2] += pi[i]
    return p1, p2


def test_tandem_blocking_matches_ctmc() -> None:
    rng = np.random.default_rng(41)
    n, cap = 1_000_000, 2
    m1, m2 = 0.6, 0.7
    arrive = np.cumsum(rng.exponential(1.0, n))
    t = tandem_blocking(arrive, rng.exponential(m1, n), rng.exponential(m2, n), cap)
    t0, t1 = arrive[WARM], arrive[-1]
    p1, p2 = tandem_ctmc(1.0, 1 / m1, 1 / m2, cap)
    for name, sim, ref in (
        ("tandem station 1", dist(arrive, t.leave1, t0, t1), p1),
        ("tandem station 2", dist(t.leave1, t.depart, t0, t1), p2),
    ):
        m_sim, m_ref, w = report(name, sim, ref)
        assert abs(m_sim / m_ref - 1) < 0.02
        assert w < 0.02 * m_ref


# --- Little's law ----------------------------------------------------------------------------


def _queues() -> dict[str, Callable[[], tuple[F64, F64]]]:
    rng = np.random.default_rng(51)
    n = 100_000
    arrive = np.cumsum(rng.exponential(1.0, n))
    s = rng.exponential(0.8, n)

    def blocking() -> tuple[F64, F64]:
        ins, _, dep = blocking_fifo(rng.exponential(1.0, n), s, 2)
        return ins, dep

    def tandem() -> tuple[F64, F64]:
        return arrive, tandem_blocking(arrive, s * 0.7, s, 1).depart

    def bulk_stage(stage: str, latency: float = 0.0) -> Callable[[], tuple[F64, F64]]:
        def run() -> tuple[F64, F64]:
            t = tandem_bulk(arrive, 4, 2.5, 40.0, s * 0.9, 6, min_batch=2, latency_ns=latency)
            pairs = {
                "host": (arrive, t.start1),
                "bus": (t.start1, t.deliver),
                "device": (t.deliver, t.start2),
                "virtual": (arrive, t.depart),
            }
            return pairs[stage]

        return run

    queues: dict[str, Callable[[], tuple[F64, F64]]] = {
        "M/M/1": lambda: (arrive, lindley_fifo(arrive, s)),
        "M/D/1": lambda: (arrive, lindley_fifo(arrive, np.full(n, 0.8))),
        "blocking buffer": blocking,
        "tandem": tandem,
    }
    for stage in ("host", "bus", "device", "virtual"):
        queues[f"tandem_bulk {stage}"] = bulk_stage(stage)
        # Latency 3 ns against a device buffer of 6: items in flight, and held transfers.
        queues[f"tandem_bulk latency {stage}"] = bulk_stage(stage, 3.0)
    return queues


@pytest.mark.parametrize("name", list(_queues()))
def test_littles_law(name: str) -> None:
    """Mean occupancy over a window holding every stay = throughput x mean sojourn."""
    arrive, depart = _queues()[name]()
    t0, t1 = float(arrive.min()), float(depart.max())
    levels, ns = occupancy_from_events(arrive, depart, t0, t1)
    occupancy = float(levels @ ns) / (t1 - t0)
    lam = arrive.size / (t1 - t0)
    sojourn = float(np.mean(depart - arrive))
    print(f"Little {name}: L {occupancy:.5f} lambda*W {lam * sojourn:.5f}")
    assert math.isclose(occupancy, lam * sojourn, rel_tol=0.005)
    assert ns.sum() == pytest.approx(t1 - t0, rel=1e-12)
