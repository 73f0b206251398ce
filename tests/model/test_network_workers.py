"""Stages run as pools of workers (``StageModel.workers``: threads on one shared queue, or with
``own_interpreters`` a process pool) in the pipeline simulator, against what is known of them:
the M/M/c queue's Erlang-C formula, a saturated pool's rate, a source's items split among its
workers, the interpreter lock serialising a thread pool (and not a process pool), and the
compiled event loop agreeing with the Python loop."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamscope.model import ModelInputError
from streamscope.model._netloop import Simulation
from streamscope.model.network import (
    BLOCKED_IN,
    BUSY,
    COMPILED,
    ChannelModel,
    Network,
    SimResult,
    StageModel,
    simulate,
)

MS = 1e6


def _rate(r: SimResult, channel: str) -> float:
    """Items/s taken from ``channel`` over the run."""
    return len(r.take_times[channel]) / (r.end_ns / 1e9)


def erlang_c_lq(lam: float, mean_service: float, c: int) -> float:
    """The M/M/c queue's mean number waiting (not in service), Lq = C(c, a) rho / (1 - rho)
    with a = lam E[S] and rho = a / c; C(c, a), Erlang's C: the chance an arrival waits."""
    a = lam * mean_service
    rho = a / c
    top = a**c / math.factorial(c) / (1 - rho)
    waits = top / (sum(a**k / math.factorial(k) for k in range(c)) + top)
    return waits * rho / (1 - rho)


def _mmc(c: int, rho: float, items: int, seed: int) -> tuple[float, float]:
    """One run of an M/M/c queue: Poisson arrivals (a source whose steps are exponential gaps
    of 1 ms) into ``c`` workers of exponential service (mean ``rho * c`` ms) on one channel of
    2000 places (never near full at rho 0.7: it stays below 60 places), no CPU time (no lock or
    core to wait for), into a sink. The channel holds the items waiting: its time-average
    occupancy against Lq with the rates the run realised (the arrivals' from their insertion
    times, the service's from the workers' busy time), as tests/model/test_mm1_theory.py
    evaluates theory."""
    rng = np.random.default_rng(1000 + seed)
    gaps = rng.exponential(MS, 100_000)
    service = rng.exponential(rho * c * MS, 100_000)
    net = Network(
        (
            StageModel("src", gaps, items=items),
            StageModel("srv", service, workers=c),
            StageModel("sink", np.array([0.0]), ratio=0),
        ),
        (ChannelModel("q", "src", "srv", 2000), ChannelModel("out", "srv", "sink", 2000)),
    )
    r = simulate(net, seed=seed)
    assert r.complete and r.levels["q"][-1] == 0  # never full: no blocking
    puts = r.put_times["q"]
    lam = (len(puts) - 1) / float(puts[-1] - puts[0])
    mean_service = float(r.states["srv"][BUSY]) / items
    return r.mean_occupancy("q"), erlang_c_lq(lam, mean_service, c)


@pytest.mark.parametrize("c", [2, 3])
def test_a_pool_on_one_queue_is_an_m_m_c_queue(c: int) -> None:
    """Lq of the simulated M/M/c queue at rho 0.7 is Erlang C's. The tolerance comes from the
    run length: over 30 seeds a run of n items gave Lq / theory with a standard deviation of
    about 8 / sqrt(n) (1.3 % at n = 400,000; 1.9-2.6 % at 100,000, for c = 2 and 3) and a
    mean within 0.3 % of 1 (the empty start's bias); the mean of ``seeds`` runs is held to
    4 standard deviations of that mean, 2.5 % here (5 % for the Python loop's shorter runs)."""
    items = 400_000 if COMPILED else 100_000
    seeds = 4
    ratios = [sim / theory for sim, theory in (_mmc(c, 0.7, items, s) for s in range(seeds))]
    tolerance = 4 * 8 / math.sqrt(items * seeds)
    assert float(np.mean(ratios)) == pytest.approx(1.0, abs=tolerance)


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_a_saturated_pool_passes_workers_items_per_service_time(workers: int) -> None:
    """A source that is never the limit into a stage of deterministic service T: its workers
    pass ``workers`` items per T, busy all the time after the first item."""
    t = 1.0 * MS
    net = Network(
        (
            StageModel("src", np.array([1e3]), items=3000),
            StageModel("pool", np.array([t]), ratio=0, workers=workers),
        ),
        (ChannelModel("q", "src", "pool", 4),),
    )
    r = simulate(net)
    assert len(r.take_times["q"]) == 3000
    assert _rate(r, "q") == pytest.approx(workers * 1e9 / t, rel=0.01)
    assert r.states["pool"][BUSY] == pytest.approx(3000 * t)
    assert r.workers["pool"] == workers
    assert r.states["pool"].sum() == pytest.approx(workers * r.end_ns)


def test_a_sources_items_are_split_among_its_workers() -> None:
    """A source of 101 items in 2 workers makes exactly 101 (51 and 50); the sink gets every
    one, and the run ends: the channel ends only once both workers have finished (the first to
    finish does not end it for the other's last item)."""
    src = StageModel("src", np.array([MS]), items=101, workers=2)
    sink = StageModel("sink", np.array([0.1 * MS]), ratio=0)
    r = simulate(Network((src, sink), (ChannelModel("q", "src", "sink", 4),)))
    assert r.complete
    assert len(r.put_times["q"]) == len(r.take_times["q"]) == 101
    # two items a millisecond, the odd one last: 51 ms, then the sink's last 0.1 ms
    assert r.end_ns == pytest.approx(51 * MS + 0.1 * MS)
    assert r.put_times["q"][-1] == pytest.approx(51 * MS)


def test_a_source_with_more_workers_than_items() -> None:
    """3 items in 5 workers: three make one each, two have none and finish at once."""
    src = StageModel("src", np.array([MS]), items=3, workers=5)
    sink = StageModel("sink", np.array([0.0]), ratio=0)
    r = simulate(Network((src, sink), (ChannelModel("q", "src", "sink", 8),)))
    assert r.complete and len(r.take_times["q"]) == 3
    assert r.end_ns == pytest.approx(MS)


def test_a_pool_drains_what_its_producers_left() -> None:
    """A pool of 3 consumers on a source of 2 workers: every item is taken once, and every
    consumer finishes once both producers have finished and the channel is empty."""
    rng = np.random.default_rng(4)
    src = StageModel("src", rng.exponential(MS, 64), items=500, workers=2)
    pool = StageModel("pool", rng.exponential(2 * MS, 64), workers=3)
    sink = StageModel("sink", np.array([0.01 * MS]), ratio=0)
    chans = (ChannelModel("a", "src", "pool", 3), ChannelModel("b", "pool", "sink", 2))
    r = simulate(Network((src, pool, sink), chans), seed=1)
    assert r.complete
    for c in ("a", "b"):
        assert len(r.put_times[c]) == len(r.take_times[c]) == 500
        assert np.all(np.diff(r.take_times[c]) >= 0)
    assert r.states["pool"].sum() == pytest.approx(3 * r.end_ns)


def test_threads_share_the_lock_processes_do_not() -> None:
    """Two workers of pure CPU (1 ms an item, all of it holding the lock) on 2 cores: as threads
    of one interpreter the lock lets one run at a time (1 item per ms); as processes, each with
    an interpreter of its own, both run (2 items per ms)."""
    src = StageModel("src", np.array([1e3]), items=2000, interpreter="feeder")
    rates = {}
    for own in (False, True):
        pool = StageModel("pool", np.array([MS]), cpu_share=1.0, locked=1.0, ratio=0, workers=2,
                          own_interpreters=own)  # fmt: skip
        r = simulate(Network((src, pool), (ChannelModel("q", "src", "pool", 4),), cores=2))
        assert r.complete
        rates[own] = _rate(r, "q")
        locks = {"feeder", "main#0", "main#1"} if own else {"feeder", "main"}
        assert set(r.lock_busy) == locks
        assert r.cpu["pool"] == pytest.approx(2000 * MS)
    assert rates[False] == pytest.approx(1e3, rel=0.01)
    assert rates[True] == pytest.approx(2e3, rel=0.01)


def test_own_interpreters_take_their_stages_switch_interval() -> None:
    """A worker's own interpreter has the switch interval given for it, else its stage's
    interpreter's, else CPython's default."""
    pool = StageModel("pool", np.array([MS]), items=4, workers=3, own_interpreters=True,
                      interpreter="p")  # fmt: skip
    net = Network((pool,), (), switch_ns={"p": 2e6, "p#2": 7e6})
    sim = Simulation(net, math.inf, np.random.default_rng(0), False)
    assert sim.lock_names == ["p#0", "p#1", "p#2"]
    assert [lk.switch for lk in sim.locks] == [2e6, 2e6, 7e6]
    assert [w.lock for w in sim.workers] == [0, 1, 2]
    assert [w.left for w in sim.workers] == [2, 1, 1]


def test_a_pool_needs_a_worker() -> None:
    for n in (0, -1):
        net = Network((StageModel("a", np.array([1.0]), items=3, workers=n),), ())
        with pytest.raises(ModelInputError, match="worker"):
            simulate(net)


def test_one_worker_is_the_stage_as_it_was() -> None:
    """``workers=1`` (the default) is the single thread: the same figures as before pools."""
    rng = np.random.default_rng(2)
    a = StageModel("a", rng.exponential(MS, 50), items=300, cpu_share=0.5)
    b = StageModel("b", rng.exponential(MS, 50), ratio=0, cpu_share=0.5, workers=1)
    net = Network((a, b), (ChannelModel("q", "a", "b", 2),), cores=1)
    r = simulate(net, seed=3)
    b2 = StageModel("b", b.service, ratio=0, cpu_share=0.5)
    r2 = simulate(Network((a, b2), net.channels, cores=1), seed=3)
    assert r.end_ns == r2.end_ns and np.array_equal(r.states["b"], r2.states["b"])
    assert r.shares("b")[BLOCKED_IN] == r2.shares("b")[BLOCKED_IN]


@pytest.mark.skipif(not COMPILED, reason="the compiled event loop was not built")
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_compiled_loop_is_the_python_loop_for_pools(seed: int) -> None:
    """Pools everywhere (a source of 3 workers, a thread pool sharing the lock with the source,
    a process pool, a pool on a link's delay, a pool of compiled code), resampled, with a
    monitor and background load: both loops give the same figures, bit for bit."""
    rng = np.random.default_rng(seed)
    stages = (
        StageModel("src", rng.exponential(0.3 * MS, 32), items=400, workers=3, cpu_share=0.2),
        StageModel("threads", rng.exponential(MS, 32), cpu_share=0.6, workers=3, ratio=1.5),
        StageModel("procs", rng.exponential(2 * MS, 32), cpu_share=0.9, workers=4,
                   own_interpreters=True, interpreter="pool"),
        StageModel("native", rng.exponential(MS, 32), cpu_share=0.8, locked=0.2, workers=2),
        StageModel("sink", np.array([0.01 * MS]), ratio=0, workers=2, interpreter="sink"),
    )  # fmt: skip
    chans = (
        ChannelModel("src -> threads", "src", "threads", 3),
        ChannelModel("threads -> procs", "threads", "procs", 2),
        ChannelModel("procs -> native", "procs", "native", 2, delay_ns=0.4 * MS),
        ChannelModel("native -> sink", "native", "sink", 1),
    )
    net = Network(stages, chans, cores=3, background_cores=0.6, background_job_ns=0.3 * MS,
                  monitor_ns_per_item=0.02 * MS, switch_ns={"main": 0.5 * MS})  # fmt: skip
    a = simulate(net, seed=seed, resample=True, compiled=False)
    b = simulate(net, seed=seed, resample=True, compiled=True)
    assert a.complete
    for c in chans:  # (each worker keeps its own credit of ``ratio``: about 600 items)
        assert len(a.put_times[c.name]) == len(a.take_times[c.name])
    assert 590 <= len(a.take_times["native -> sink"]) <= 600
    assert (a.end_ns, a.complete, a.cores_busy) == (b.end_ns, b.complete, b.cores_busy)
    assert (a.lock_busy, a.cpu, a.runq, a.workers) == (b.lock_busy, b.cpu, b.runq, b.workers)
    for name in ("put_times", "take_times", "levels", "states"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.keys() == y.keys()
        for k in x:
            assert np.array_equal(x[k], y[k]), (name, k)
