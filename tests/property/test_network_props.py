"""The pipeline simulator on random pipelines: every one runs to its end (no stage left waiting
on another that will never go on), and every item the source makes reaches the sink, whatever
the replicas, capacities, interpreter locks, switch intervals and cores; and its compiled event
loop gives what its Python loop gives, bit for bit, on pipelines with every rule drawn (zip,
broadcast, ratios, link delays, background load, horizons)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.model.network import (
    COMPILED,
    ChannelModel,
    Network,
    SimResult,
    StageModel,
    simulate,
)

MS = 1e6


@st.composite
def pipelines(draw: st.DrawFn, every_rule: bool = False) -> Network:
    """Random pipelines of replicas between single stages; ``every_rule``: with zip fan-in,
    stages of several outputs per input (or fewer), sped-up stages, link delays and background
    load drawn too."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    items = draw(st.integers(1, 120))
    layers = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    interpreters = ["main", "p1", "p2"]

    def stage(name: str, **kw: object) -> StageModel:
        if every_rule:
            kw.setdefault("speed", draw(st.sampled_from([1.0, 2.0, 0.7])))
            kw.setdefault("in_order", draw(st.booleans()))
            if "items" not in kw:
                kw.setdefault("ratio", draw(st.sampled_from([1.0, 1.0, 0.5, 2.0])))
        return StageModel(
            name,
            rng.exponential(draw(st.floats(0.01, 2.0)) * MS, 16),
            cpu_share=draw(st.floats(0.0, 1.0)),
            overhead_ns=draw(st.floats(0.0, 0.2)) * MS,
            locked=draw(st.sampled_from([1.0, 0.5, 0.0])),
            interpreter=draw(st.sampled_from(interpreters)),
            **kw,  # type: ignore[arg-type]
        )

    def capacity() -> int:
        return draw(st.integers(1, 4))

    def delay() -> float:
        return draw(st.sampled_from([0.0, 0.0, 0.3 * MS])) if every_rule else 0.0

    stages = [stage("src", items=items, fanout=draw(st.sampled_from(["roundrobin", "broadcast"])))]
    chans: list[ChannelModel] = []
    prev = "src"
    # Replicas between single stages (``split -> walk0..walkN -> avg``), as the runner's
    # round-robin rules are meant for: a group fed by one stage and feeding one stage.
    for i, n in enumerate(layers):
        names = [f"s{i}_{k}" for k in range(n)]
        join = f"j{i}"
        stages += [stage(m) for m in names]
        zip_in = every_rule and draw(st.booleans())
        stages.append(stage(join, fanin="zip") if zip_in else stage(join))
        for m in names:
            chans.append(ChannelModel(f"{prev} -> {m}", prev, m, capacity(), delay()))
            chans.append(ChannelModel(f"{m} -> {join}", m, join, capacity(), delay()))
        prev = join
    stages.append(StageModel("sink", np.array([0.01 * MS]), ratio=0.0,
                             interpreter=draw(st.sampled_from(interpreters))))  # fmt: skip
    chans.append(ChannelModel(f"{prev} -> sink", prev, "sink", draw(st.integers(1, 4))))
    switch = {i: draw(st.sampled_from([0.05, 1.0, 5.0])) * MS for i in interpreters}
    background = draw(st.sampled_from([0.0, 0.4, 1.0, 1.7])) if every_rule else 0.0
    return Network(tuple(stages), tuple(chans), cores=draw(st.integers(1, 3)), switch_ns=switch,
                   monitor_ns_per_item=draw(st.sampled_from([0.0, 0.05 * MS])),
                   background_cores=background, background_job_ns=0.2 * MS)  # fmt: skip


@settings(max_examples=150, deadline=None)
@given(pipelines(), st.integers(0, 3))
def test_every_random_pipeline_runs_to_its_end(net: Network, seed: int) -> None:
    r = simulate(net, seed=seed, resample=True)
    assert r.complete
    for c in net.channels:  # what went in came out, in order
        assert len(r.put_times[c.name]) == len(r.take_times[c.name])
        assert np.all(r.take_times[c.name] >= r.put_times[c.name])
    src = net.stage("src")
    outs = [c for c in net.channels if c.src == "src"]
    made = sum(len(r.put_times[c.name]) for c in outs)
    assert made == src.items * (len(outs) if src.fanout == "broadcast" else 1)
    shares = r.shares("sink")
    assert abs(shares.sum() - 1.0) < 1e-9 or shares.sum() == 0


def _same(a: SimResult, b: SimResult) -> None:
    assert (a.end_ns, a.complete, a.cores_busy) == (b.end_ns, b.complete, b.cores_busy)
    assert (a.lock_busy, a.cpu, a.runq) == (b.lock_busy, b.cpu, b.runq)
    for name in ("put_times", "take_times", "levels", "states"):
        x, y = getattr(a, name), getattr(b, name)
        assert x.keys() == y.keys()
        for k in x:
            assert np.array_equal(x[k], y[k]), (name, k)


@pytest.mark.skipif(not COMPILED, reason="the compiled event loop was not built")
@settings(max_examples=200, deadline=None)
@given(pipelines(every_rule=True), st.integers(0, 3), st.sampled_from([None, 0.5, 20.0]))
def test_the_compiled_loop_is_the_python_loop(
    net: Network, seed: int, horizon: float | None
) -> None:
    h = np.inf if horizon is None else horizon * MS
    python = simulate(net, seed=seed, resample=True, horizon_ns=h, compiled=False)
    compiled = simulate(net, seed=seed, resample=True, horizon_ns=h, compiled=True)
    _same(python, compiled)
