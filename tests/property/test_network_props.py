"""The pipeline simulator on random pipelines: every one runs to its end (no stage left waiting
on another that will never go on), and every item the source makes reaches the sink, whatever
the replicas, capacities, interpreter locks, switch intervals and cores."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.model.network import ChannelModel, Network, StageModel, simulate

MS = 1e6


@st.composite
def pipelines(draw: st.DrawFn) -> Network:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    items = draw(st.integers(1, 120))
    layers = draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    interpreters = ["main", "p1", "p2"]

    def stage(name: str, **kw: object) -> StageModel:
        return StageModel(
            name,
            rng.exponential(draw(st.floats(0.01, 2.0)) * MS, 16),
            cpu_share=draw(st.floats(0.0, 1.0)),
            overhead_ns=draw(st.floats(0.0, 0.2)) * MS,
            locked=draw(st.sampled_from([1.0, 0.5, 0.0])),
            interpreter=draw(st.sampled_from(interpreters)),
            **kw,  # type: ignore[arg-type]
        )

    stages = [stage("src", items=items, fanout=draw(st.sampled_from(["roundrobin", "broadcast"])))]
    chans: list[ChannelModel] = []
    prev = "src"
    # Replicas between single stages (``split -> walk0..walkN -> avg``), as the runner's
    # round-robin rules are meant for: a group fed by one stage and feeding one stage.
    for i, n in enumerate(layers):
        names = [f"s{i}_{k}" for k in range(n)]
        join = f"j{i}"
        stages += [stage(m) for m in names]
        stages.append(stage(join))
        for m in names:
            chans.append(ChannelModel(f"{prev} -> {m}", prev, m, draw(st.integers(1, 4))))
            chans.append(ChannelModel(f"{m} -> {join}", m, join, draw(st.integers(1, 4))))
        prev = join
    stages.append(StageModel("sink", np.array([0.01 * MS]), ratio=0.0,
                             interpreter=draw(st.sampled_from(interpreters))))  # fmt: skip
    chans.append(ChannelModel(f"{prev} -> sink", prev, "sink", draw(st.integers(1, 4))))
    switch = {i: draw(st.sampled_from([0.05, 1.0, 5.0])) * MS for i in interpreters}
    return Network(tuple(stages), tuple(chans), cores=draw(st.integers(1, 3)), switch_ns=switch,
                   monitor_ns_per_item=draw(st.sampled_from([0.0, 0.05 * MS])))  # fmt: skip


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
