"""The pipeline simulator (``model.network``) against what is known of its networks: queueing
theory for a blocking tandem, exact figures for deterministic services, the interpreter lock's
and the cores' capacity, the fan rules, conservation of items."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.model import ModelInputError
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    COMPILED,
    ChannelModel,
    Network,
    StageModel,
    simulate,
)

MS = 1e6


def _rate(r, channel: str) -> float:  # type: ignore[no-untyped-def]
    """Items/s taken from ``channel`` over the run."""
    return len(r.take_times[channel]) / (r.end_ns / 1e9)


def _chain(*stages: StageModel, cap: int = 4) -> Network:
    chans = tuple(
        ChannelModel(f"{a.name} -> {b.name}", a.name, b.name, cap)
        for a, b in zip(stages, stages[1:], strict=False)
    )
    return Network(stages, chans)


@pytest.mark.parametrize("cap", [1, 4])
def test_saturated_blocking_tandem_meets_theory(cap: int) -> None:
    """Two exponential stations of equal rate, a buffer of B between them, blocking after
    service, the first never starved: throughput (B + 2) / (B + 3) of one station's rate."""
    rng = np.random.default_rng(3)
    exp = rng.exponential(MS, 50_000)
    fast = np.full(8, 1.0)  # a source that is never the limit
    net = Network(
        (
            StageModel("src", fast, items=40_000),
            StageModel("a", exp),
            StageModel("b", exp, ratio=0),
        ),
        (ChannelModel("src -> a", "src", "a", 1), ChannelModel("a -> b", "a", "b", cap)),
    )
    r = simulate(net, seed=5)
    x = _rate(r, "a -> b") / 1e3  # items per ms
    assert x == pytest.approx((cap + 2) / (cap + 3), rel=0.02)


def test_deterministic_tandem_is_exact() -> None:
    """A source of 1 ms per item into a stage of 2 ms: 500 items/s, the source blocked half its
    time, the stage never starved after its first item."""
    net = _chain(
        StageModel("src", np.array([MS]), items=1000), StageModel("a", np.array([2 * MS]), ratio=0)
    )
    r = simulate(net)
    assert len(r.take_times["src -> a"]) == 1000
    assert r.end_ns == pytest.approx(1 * MS + 1000 * 2 * MS)
    src = r.shares("src")
    assert src[BLOCKED_OUT] == pytest.approx(0.5, abs=0.01)
    assert r.shares("a")[BLOCKED_IN] == pytest.approx(MS / r.end_ns, rel=1e-6)


def test_items_are_conserved_through_fan_out_and_in() -> None:
    """Round-robin to four replicas and back: every item reaches the sink, each replica gets a
    quarter of them, and replicas that sleep (free of the lock) work in parallel."""
    src = StageModel("src", np.array([0.1 * MS]), items=2000, cpu_share=1.0)
    ws = [StageModel(f"w{i}", np.array([4 * MS])) for i in range(4)]
    sink = StageModel("sink", np.array([0.01 * MS]), ratio=0)
    chans = [ChannelModel(f"src -> w{i}", "src", f"w{i}", 4) for i in range(4)]
    chans += [ChannelModel(f"w{i} -> sink", f"w{i}", "sink", 4) for i in range(4)]
    r = simulate(Network((src, *ws, sink), tuple(chans)))
    taken = [len(r.take_times[f"w{i} -> sink"]) for i in range(4)]
    assert taken == [500] * 4
    assert sum(taken) / (r.end_ns / 1e9) == pytest.approx(1000, rel=0.02)


def test_broadcast_and_zip() -> None:
    """A broadcast puts each item into every output; a zip takes one from each input."""
    src = StageModel("src", np.array([MS]), items=300, fanout="broadcast")
    a, b = StageModel("a", np.array([0.5 * MS])), StageModel("b", np.array([0.2 * MS]))
    join = StageModel("join", np.array([0.1 * MS]), ratio=0, fanin="zip")
    chans = (
        ChannelModel("src -> a", "src", "a", 2), ChannelModel("src -> b", "src", "b", 2),
        ChannelModel("a -> join", "a", "join", 2), ChannelModel("b -> join", "b", "join", 2),
    )  # fmt: skip
    r = simulate(Network((src, a, b, join), chans))
    assert len(r.put_times["src -> a"]) == len(r.put_times["src -> b"]) == 300
    assert len(r.take_times["a -> join"]) == len(r.take_times["b -> join"]) == 300
    assert r.states["join"][BUSY] == pytest.approx(300 * 0.1 * MS)


def test_the_interpreter_lock_serialises_cpu_time() -> None:
    """Two stages of pure CPU (1 ms and 2 ms an item) on one interpreter take turns: one item
    per 3 ms. In two processes on two cores they overlap (the slower one's 2 ms); on one core
    they take turns again."""
    src = StageModel("src", np.array([0.001 * MS]), items=600, cpu_share=1.0, interpreter="p0")
    a = StageModel("a", np.array([MS]), cpu_share=1.0)
    b = StageModel("b", np.array([2 * MS]), cpu_share=1.0, ratio=0)
    shared = Network((src, a, b), _chain(src, a, b).channels, cores=2)
    assert _rate(simulate(shared), "a -> b") == pytest.approx(1e3 / 3, rel=0.02)
    apart = Network(
        (src, a, b.__class__(**{**_fields(b), "interpreter": "p1"})), shared.channels, cores=2
    )
    assert _rate(simulate(apart), "a -> b") == pytest.approx(1e3 / 2, rel=0.02)
    one_core = Network(apart.stages, apart.channels, cores=1)
    assert _rate(simulate(one_core), "a -> b") == pytest.approx(1e3 / 3, rel=0.03)


def test_cpu_that_releases_the_lock_needs_only_a_core() -> None:
    """The same stages with their CPU time in compiled code (``locked=0``): they overlap on two
    cores even in one interpreter."""
    src = StageModel("src", np.array([0.001 * MS]), items=600, cpu_share=1.0, interpreter="p0")
    a = StageModel("a", np.array([MS]), cpu_share=1.0, locked=0.0)
    b = StageModel("b", np.array([2 * MS]), cpu_share=1.0, ratio=0, locked=0.0)
    net = Network((src, a, b), _chain(src, a, b).channels, cores=2)
    assert _rate(simulate(net), "a -> b") == pytest.approx(1e3 / 2, rel=0.02)


def test_a_thread_keeps_the_lock_until_it_waits_or_the_switch_interval() -> None:
    """A pure-Python stage running item after item keeps the lock: the light threads before
    and after it get it only when they have waited the switch interval, so the channel after it
    fills and the one before it drains in the meantime; with a short interval neither does."""

    def occupancy(switch_ns: float) -> tuple[float, float]:
        src = StageModel("src", np.array([0.01 * MS]), items=3000, cpu_share=1.0)
        work = StageModel("work", np.array([MS]), cpu_share=1.0)
        sink = StageModel("sink", np.array([0.01 * MS]), cpu_share=1.0, ratio=0)
        net = Network((src, work, sink), _chain(src, work, sink).channels, cores=2,
                      switch_ns={"main": switch_ns})  # fmt: skip
        r = simulate(net)
        return r.mean_occupancy("src -> work"), r.mean_occupancy("work -> sink")

    before, after = occupancy(5 * MS)
    assert before < 2.0 and after > 1.0
    before, after = occupancy(0.2 * MS)
    assert before > 3.5 and after < 0.3


def test_a_links_delay_holds_items_back() -> None:
    """An item put into a channel with a delay cannot be taken before it: end-to-end, every
    item is at least that late."""
    src = StageModel("src", np.array([MS]), items=50)
    sink = StageModel("sink", np.array([0.0]), ratio=0)
    net = Network((src, sink), (ChannelModel("link", "src", "sink", 8, delay_ns=3 * MS),))
    r = simulate(net)
    assert np.all(r.take_times["link"] - r.put_times["link"] >= 3 * MS - 1e-6)


def test_background_load_takes_cores() -> None:
    """One core, half of it busy with background jobs: a pure-CPU stage gets about half (its
    sink in another process, which needs no core: nothing else waits on its lock)."""
    src = StageModel("src", np.array([MS]), items=2000, cpu_share=1.0)
    sink = StageModel("sink", np.array([0.0]), ratio=0, interpreter="p1")
    net = Network((src, sink), _chain(src, sink).channels, cores=1, background_cores=0.5,
                  background_job_ns=0.5 * MS)  # fmt: skip
    assert _rate(simulate(net, seed=2), "src -> sink") == pytest.approx(500, rel=0.05)


def test_a_whole_core_of_background_load_is_a_thread_that_never_stops() -> None:
    """One core of other load on one CPU (a CPU hog): the OS shares the core, a pure-CPU stage
    gets half of it; on two CPUs, a whole one."""
    src = StageModel("src", np.array([MS]), items=1000, cpu_share=1.0)
    sink = StageModel("sink", np.array([0.0]), ratio=0, interpreter="p1")
    for cores, rate in ((1, 500), (2, 1000)):
        net = Network((src, sink), _chain(src, sink).channels, cores=cores, background_cores=1.0)
        r = simulate(net)
        assert r.complete
        assert _rate(r, "src -> sink") == pytest.approx(rate, rel=0.01)


def test_resampled_replications_vary_but_agree() -> None:
    rng = np.random.default_rng(0)
    net = _chain(StageModel("src", rng.exponential(MS, 300), items=3000),
                 StageModel("a", rng.exponential(0.8 * MS, 300), ratio=0))  # fmt: skip
    rates = [_rate(simulate(net, seed=s, resample=True), "src -> a") for s in range(4)]
    assert len(set(rates)) == 4
    assert max(rates) / min(rates) < 1.2


@pytest.mark.parametrize(
    ("net", "match"),
    [
        (Network((StageModel("a", np.array([])),), ()), "service-time samples"),
        (Network((StageModel("a", np.array([1.0])),), (ChannelModel("x", "a", "b", 1),)), "lacks"),
        (Network((StageModel("a", np.array([1.0]), items=3),), (), cores=0), "core"),
        (Network((StageModel("a", np.array([1.0]), speed=0),), ()), "speed"),
        (Network((StageModel("a", np.array([1.0]), items=3, workers=0),), ()), "worker"),
    ],
)
def test_a_network_that_cannot_be_simulated_is_refused(net: Network, match: str) -> None:
    with pytest.raises(ModelInputError, match=match):
        simulate(net)


def test_an_unbounded_source_needs_a_horizon() -> None:
    net = _chain(StageModel("src", np.array([MS])), StageModel("a", np.array([MS]), ratio=0))
    with pytest.raises(ModelInputError, match="horizon"):
        simulate(net)
    r = simulate(net, horizon_ns=100 * MS)
    assert r.end_ns == pytest.approx(100 * MS)
    assert 95 <= len(r.take_times["src -> a"]) <= 100


def _fields(s: StageModel) -> dict[str, object]:
    return {f: getattr(s, f) for f in s.__dataclass_fields__}


def test_the_cores_waits_are_counted() -> None:
    """Two threads computing in separate interpreters share one core: each item of 1 ms of
    CPU takes 2 ms of wall, so each thread waits for the core as long as it computes, and two
    cores let each compute without waiting."""
    ms = np.array([MS])
    for cores, wait in ((1, 1.0), (2, 0.0)):
        net = Network(
            (StageModel("a", ms, cpu_share=1.0, items=200, interpreter="p"),
             StageModel("b", ms, cpu_share=1.0, items=200, interpreter="q"),
             StageModel("sink", np.array([0.0]), ratio=0, interpreter="r")),
            (ChannelModel("a -> sink", "a", "sink", 4), ChannelModel("b -> sink", "b", "sink", 4)),
            cores=cores,
        )  # fmt: skip
        r = simulate(net)
        for s in ("a", "b"):
            assert r.cpu[s] == pytest.approx(200 * MS)
            assert r.runq[s] / r.cpu[s] == pytest.approx(wait, abs=0.01)


@pytest.mark.skipif(not COMPILED, reason="the compiled event loop was not built")
def test_the_compiled_loop_grows_its_rings_as_the_python_loop_its_deques() -> None:
    """A bursty source into a slow stage through a channel of 200 places: the channel's items
    (and the waits on two locks of many threads) pass the compiled loop's first ring size many
    times over, wrapped around; the result is the Python loop's, bit for bit."""
    rng = np.random.default_rng(11)
    burst = np.where(rng.random(64) < 0.8, 1e3, 3 * MS)  # mostly back to back
    stages = [
        StageModel("src", burst, items=3000, interpreter="main"),
        StageModel("slow", rng.exponential(0.3 * MS, 64), cpu_share=0.3, interpreter="main"),
    ]
    stages += [StageModel(f"w{i}", rng.exponential(0.5 * MS, 64), cpu_share=1.0, ratio=0,
                          interpreter="main") for i in range(24)]  # fmt: skip
    chans = [ChannelModel("src -> slow", "src", "slow", 200)]
    chans += [ChannelModel(f"slow -> w{i}", "slow", f"w{i}", 2) for i in range(24)]
    net = Network(tuple(stages), tuple(chans), cores=2, switch_ns={"main": 0.2 * MS})
    a, b = simulate(net, seed=3, compiled=False), simulate(net, seed=3, compiled=True)
    assert a.levels["src -> slow"][17:].sum() > 0  # the ring did grow
    assert (a.end_ns, a.lock_busy, a.runq) == (b.end_ns, b.lock_busy, b.runq)
    for k in a.take_times:
        assert np.array_equal(a.take_times[k], b.take_times[k])
        assert np.array_equal(a.levels[k], b.levels[k])


def _pools(case: str) -> tuple[Network, float]:
    """Networks with stages of several workers (and the horizon to run them to)."""
    rng = np.random.default_rng(7)

    def exp(ms: float) -> np.ndarray:
        return rng.exponential(ms * MS, 64)

    if case == "fan":  # a pool between a fan-out and a zip, and a broadcasting source pool
        stages = (
            StageModel("src", exp(0.2), items=500, workers=2, fanout="broadcast", cpu_share=0.5),
            StageModel("a", exp(1.0), workers=3, cpu_share=0.7, overhead_ns=0.05 * MS),
            StageModel("b", exp(0.5), workers=2, cpu_share=0.3, own_interpreters=True),
            StageModel("join", exp(0.05), fanin="zip", ratio=0, cpu_share=1.0),
        )
        chans = (
            ChannelModel("src -> a", "src", "a", 2), ChannelModel("src -> b", "src", "b", 2),
            ChannelModel("a -> join", "a", "join", 3, delay_ns=0.2 * MS),
            ChannelModel("b -> join", "b", "join", 1),
        )  # fmt: skip
        return Network(stages, chans, cores=2, switch_ns={"main": 0.3 * MS}), np.inf
    if case == "ring":  # many workers waiting on one channel and on one lock, rings grown
        burst = np.where(rng.random(64) < 0.8, 1e3, 3 * MS)
        stages = (
            StageModel("src", burst, items=3000),
            StageModel("slow", exp(0.3), cpu_share=0.3, workers=2),
            StageModel("w", exp(0.5), cpu_share=1.0, ratio=0, workers=24),
        )
        chans = (ChannelModel("src -> slow", "src", "slow", 200),
                 ChannelModel("slow -> w", "slow", "w", 2))  # fmt: skip
        return Network(stages, chans, cores=2, switch_ns={"main": 0.2 * MS}), np.inf
    # an unbounded source of 3 workers to a horizon, with background load and the monitor
    stages = (
        StageModel("src", exp(0.5), workers=3, cpu_share=0.4),
        StageModel("procs", exp(2.0), workers=4, cpu_share=1.0, own_interpreters=True,
                   interpreter="pool", ratio=0),
    )  # fmt: skip
    net = Network(
        stages, (ChannelModel("q", "src", "procs", 4),), cores=3, background_cores=1.3,
        background_job_ns=0.4 * MS, monitor_ns_per_item=0.01 * MS,
    )  # fmt: skip
    return net, 300 * MS


@pytest.mark.skipif(not COMPILED, reason="the compiled event loop was not built")
@pytest.mark.parametrize("case", ["fan", "ring", "horizon"])
def test_the_compiled_loop_is_the_python_loop_with_pools_of_workers(case: str) -> None:
    """Stages of several workers (threads sharing a lock, processes with their own, a source's
    items split, several workers waiting on one channel): the Python loop's result, bit for
    bit."""
    net, horizon = _pools(case)
    for seed in (0, 1):
        a = simulate(net, seed=seed, resample=True, horizon_ns=horizon, compiled=False)
        b = simulate(net, seed=seed, resample=True, horizon_ns=horizon, compiled=True)
        assert a.complete
        assert (a.end_ns, a.cores_busy, a.lock_busy, a.cpu, a.runq, a.workers) == (
            b.end_ns, b.cores_busy, b.lock_busy, b.cpu, b.runq, b.workers,
        )  # fmt: skip
        for name in ("put_times", "take_times", "levels", "states"):
            x, y = getattr(a, name), getattr(b, name)
            assert x.keys() == y.keys()
            for k in x:
                assert np.array_equal(x[k], y[k]), (case, name, k)
        if case == "ring":
            assert a.levels["src -> slow"][17:].sum() > 0  # the ring did grow
