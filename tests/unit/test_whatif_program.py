"""The what-if model of a program run as it is: a client that hands work to a pool and takes
the results back is made a source and a sink (the simulation runs no cycle), and the rate it
is held to is its sinks'."""

from __future__ import annotations

import numpy as np

from streamscope.analysis.whatif.kinds import Change
from streamscope.analysis.whatif.programrun import (
    RESULTS,
    ProgramInputs,
    sinks_rate,
    split_clients,
)
from streamscope.analysis.whatif.terms import in_program_terms, worker_kind
from streamscope.model.network import ChannelModel, Network, StageModel, simulate


def _stage(name: str, ms: float, **kw: object) -> StageModel:
    return StageModel(name, np.array([ms * 1e6]), **kw)  # type: ignore[arg-type]


def test_a_client_of_a_pool_is_a_source_of_its_work_and_a_sink_of_its_results() -> None:
    """``main`` hands 200 items to a pool of two 10 ms workers and takes the results back:
    split, the network runs, and its rate is the pool's, 200/s."""
    stages = [_stage("main", 1.0), _stage("square", 10.0, workers=2)]
    channels = [ChannelModel("main -> square", "main", "square", 3),
                ChannelModel("square -> main", "square", "main", 200)]  # fmt: skip
    prog = ProgramInputs(runner={"main": {"items_out": 200.0}}, busy={"main": 0.01})
    stages, channels = split_clients(stages, channels, prog)
    back = RESULTS.format("main")
    assert prog.split == {"main": back}
    assert [s.name for s in stages] == ["main", back, "square"]
    assert {(c.src, c.dst) for c in channels} == {("main", "square"), ("square", back)}
    assert stages[0].items == 200 and float(stages[0].service.max()) == 0.0
    net = Network(tuple(stages), tuple(channels), cores=4)
    r = simulate(net, seed=1)
    assert r.complete
    assert abs(sinks_rate(net, r) / 200.0 - 1) < 0.03


def test_the_main_thread_is_taken_for_the_client_of_a_cycle() -> None:
    """Both ends of a cycle look alike (each puts to and takes from the other): the program's
    main thread is the one that hands the work out."""
    stages = [_stage("worker", 10.0, workers=2), _stage("main", 0.1)]
    channels = [ChannelModel("main -> worker", "main", "worker", 8),
                ChannelModel("worker -> main", "worker", "main", 100)]  # fmt: skip
    prog = ProgramInputs(runner={"main": {"items_out": 100.0}, "worker": {"items_out": 100.0}},
                         busy={"main": 0.01, "worker": 1.0})  # fmt: skip
    split_clients(stages, channels, prog)
    assert list(prog.split) == ["main"]


def test_changes_are_said_in_the_programs_terms() -> None:
    how = {"resize": "threads", "cube": worker_kind("process", ["ForkPoolWorker-1 (pid 3)"]),
           "square": worker_kind("process", ["SpawnProcess-2 (pid 4)"]),
           "fetch": worker_kind("asyncio", ["loop"])}  # fmt: skip
    said = [in_program_terms(Change.parse(c), how) for c in (
        "resize.replicas=4", "cube.replicas=4", "square.replicas=3", "fetch.replicas=1",
        "'decode -> resize'.capacity=64", "resize.speed=2x", "cpus=8",
    )]  # fmt: skip
    assert said == [
        "4 threads running resize",
        "Pool(4) for cube",
        "ProcessPoolExecutor(max_workers=3) for square",
        "1 task running fetch",
        "maxsize=64 on the queue decode -> resize",
        "resize's code 2x as fast",
        "8 CPUs",
    ]


def test_a_stage_that_begins_late_does_so_in_the_model_too() -> None:
    """A pool whose processes begin 50 ms after the client: no item comes out before they
    have begun and served one, the client waits that long more for its results (its rate
    over its working time lower), and both event loops (Python, compiled) say the same."""

    def net(start: float) -> Network:
        stages = [
            _stage("main", 0.0, items=20),
            _stage("square", 10.0, workers=2, start_ns=start),
            _stage("sink", 0.0),
        ]
        channels = [ChannelModel("main -> square", "main", "square", 3),
                    ChannelModel("square -> sink", "square", "sink", 100)]  # fmt: skip
        return Network(tuple(stages), tuple(channels), cores=4)

    late, prompt = net(50e6), net(0.0)
    r = simulate(late, seed=3, compiled=False)
    assert r.complete
    assert float(r.take_times["square -> sink"][0]) >= 60e6
    assert float(simulate(prompt, seed=3).take_times["square -> sink"][0]) < 20e6
    assert sinks_rate(late, r) < 0.9 * sinks_rate(prompt, simulate(prompt, seed=3))
    c = simulate(late, seed=3, compiled=True)
    assert np.array_equal(c.take_times["square -> sink"], r.take_times["square -> sink"])
