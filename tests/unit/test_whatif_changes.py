"""What-if changes (``analysis.whatif``): how they are written, what they do to a model's
network, what they refuse; and the self-check that stops a model which misses its run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from streamscope.analysis.whatif import Change, PipelineModel, WhatIfError, apply_changes
from streamscope.analysis.whatif.predict import _check, _figures
from streamscope.core.topology import Topology
from streamscope.model.network import (
    BLOCKED_IN,
    BLOCKED_OUT,
    BUSY,
    ChannelModel,
    Network,
    StageModel,
    simulate,
)

MS = 1e6


def _model(net: Network, throughput: float = 0.0, shares=None, occupancy=None) -> PipelineModel:  # type: ignore[no-untyped-def]
    return PipelineModel(net, Topology("t"), {}, throughput, shares or {}, occupancy or {})


def _walks(n: int, interp: str = "dev", own: bool = False) -> Network:
    """``split -> walk0..walkN-1 -> avg``, each walk on ``interp`` (its own with ``own``)."""
    ms = np.array([MS])
    stages = [StageModel("split", ms, items=100, interpreter=interp)]
    stages += [StageModel(f"walk{i}", 8 * ms, interpreter=f"p{i}" if own else interp)
               for i in range(n)]  # fmt: skip
    stages.append(StageModel("avg", ms, ratio=0, interpreter=interp))
    chans = [ChannelModel(f"split -> walk{i}", "split", f"walk{i}", 4) for i in range(n)]
    chans += [ChannelModel(f"walk{i} -> avg", f"walk{i}", "avg", 4) for i in range(n)]
    return Network(tuple(stages), tuple(chans), cores=2, switch_ns={"dev": 2e5})


@pytest.mark.parametrize(
    ("text", "target", "attr", "value"),
    [
        ("walk*.replicas=12", "walk*", "replicas", 12),
        ("avg.speed=2x", "avg", "speed", 2.0),
        ("avg.speed=0.5X", "avg", "speed", 0.5),
        ("avg -> print.capacity=128", "avg -> print", "capacity", 128),
        (" cpus = 4 ", "", "cpus", 4),
    ],
)
def test_a_change_is_read_as_written(text: str, target: str, attr: str, value: float) -> None:
    c = Change.parse(text)
    assert (c.target, c.attr, c.value, c.text) == (target, attr, value, text.strip())


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("walk*", "TARGET.ATTRIBUTE=VALUE"),
        ("walk*.color=red", "unknown attribute 'color'"),
        ("walk*.replicas=1.5", "whole number"),
        ("walk*.replicas=0", "whole number"),
        ("avg.speed=-2x", "above 0"),
        ("avg.speed=fast", "'fast' is not a number"),
        ("avg.cpus=4", "cpus takes no target"),
        ("replicas=4", "replicas needs a target"),
        ("avg.capacity=4", "capacity is a channel's"),
        ("a -> b.speed=2x", "speed is a stage's"),
    ],
)
def test_a_bad_change_says_what_is_wrong(text: str, why: str) -> None:
    with pytest.raises(WhatIfError, match=why):
        Change.parse(text)


def test_more_replicas_are_copies_fed_and_feeding_as_the_others() -> None:
    net = apply_changes(_model(_walks(8)), [Change.parse("walk*.replicas=12")])
    names = [s.name for s in net.stages]
    assert names == ["split", *(f"walk{i}" for i in range(12)), "avg"]
    outs = [c.name for c in net.channels if c.src == "split"]
    assert outs == [f"split -> walk{i}" for i in range(12)]  # dealt to in order
    assert [c.name for c in net.channels if c.dst == "avg"] == [
        f"walk{i} -> avg" for i in range(12)
    ]
    assert {s.interpreter for s in net.stages} == {"dev"}  # a device's replicas share it
    fewer = apply_changes(_model(_walks(8)), [Change.parse("walk*.replicas=4")])
    assert [s.name for s in fewer.stages] == ["split", "walk0", "walk1", "walk2", "walk3", "avg"]
    assert all("walk7" not in c.name for c in fewer.channels)


def test_a_replica_of_a_stage_alone_in_its_process_gets_a_process() -> None:
    net = apply_changes(_model(_walks(2, own=True)), [Change.parse("walk*.replicas=4")])
    interps = [s.interpreter for s in net.stages if s.name.startswith("walk")]
    assert len(set(interps)) == 4
    r = simulate(net)
    assert r.complete and sum(len(r.take_times[f"walk{i} -> avg"]) for i in range(4)) == 100


def test_speed_capacity_and_cpus() -> None:
    m = _model(_walks(2))
    net = apply_changes(m, [Change.parse("walk*.speed=2x"), Change.parse("walk1 -> avg.capacity=9"),
                            Change.parse("cpus=8")])  # fmt: skip
    assert [s.speed for s in net.stages] == [1.0, 2.0, 2.0, 1.0]
    assert {c.name: c.capacity for c in net.channels}["walk1 -> avg"] == 9
    assert net.cores == 8


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("nope*.replicas=2", "no stage matches 'nope\\*'"),
        ("a -> b.capacity=2", "no channel 'a -> b'"),
        ("split.replicas=2", None),  # a single stage: fine
        ("*.replicas=2", "not parallel replicas"),
    ],
)
def test_a_change_the_model_cannot_make_is_refused(text: str, why: str | None) -> None:
    m = _model(_walks(2))
    if why is None:
        apply_changes(m, [Change.parse(text)])
        return
    with pytest.raises(WhatIfError, match=why):
        apply_changes(m, [Change.parse(text)])


def test_a_model_that_misses_its_run_is_rejected_and_says_where() -> None:
    """The unchanged model's figures against what the run measured: a throughput far off, a
    stage's busy share and a channel's occupancy off, each named."""
    net = _walks(2)
    runs = [simulate(net, seed=s, resample=True) for s in range(3)]
    m = _model(net, throughput=10.0, shares={"avg": (0.9, 0.1, 0.0)},
               occupancy={"split -> walk0": 0.0})  # fmt: skip
    fig = _figures(net, runs, m, scale=None)
    check = _check(m, fig, runs, 0.1)
    assert check.verdict == "rejected"
    text = " ".join(check.misses)
    assert "throughput" in text and "avg busy" in text and "split -> walk0 holds" in text
    good = _model(net, throughput=fig.throughput)
    assert _check(good, fig, runs, 0.1).verdict == "consistent"


def test_a_thread_that_lost_its_core_more_than_its_share_is_slowed_by_the_rest() -> None:
    """The run's threads waited for a core (the run queue's time, per ns of CPU) as measured;
    where one busy all along waited more than the model's equal sharing makes it wait, its CPU
    time is stretched so that with the model's waits it takes as long as it did, and the
    model says so. A thread that sleeps between items is left as it is."""
    from streamscope.analysis.corewaits import RUNQ_MARGIN, core_waits

    ms = np.array([MS])
    net = Network(
        (StageModel("src", ms, cpu_share=1.0, items=100, interpreter="p"),
         StageModel("work", 2 * ms, cpu_share=1.0, interpreter="q"),
         StageModel("sink", ms, cpu_share=0.5, ratio=0, interpreter="r")),
        (ChannelModel("src -> work", "src", "work", 4),
         ChannelModel("work -> sink", "work", "sink", 4)),
        cores=3,
    )  # fmt: skip
    runner = {"src": {"cpu_ns": 100 * MS, "runq_ns": RUNQ_MARGIN / 2 * 100 * MS},
              "work": {"cpu_ns": 200 * MS, "runq_ns": 0.4 * 200 * MS},
              "sink": {"cpu_ns": 50 * MS, "runq_ns": 0.4 * 50 * MS}}  # fmt: skip
    shares = {"src": (0.5, 0.0, 0.5), "work": (0.95, 0.05, 0.0), "sink": (0.5, 0.5, 0.0)}
    slowed, said = core_waits(net, runner, shares)
    assert set(said) == {"work"}  # three cores, three threads: the model makes none wait
    assert said["work"][:2] == pytest.approx((0.4, 0.0), abs=1e-9) and not said["work"][2]
    work = slowed.stage("work")
    assert work.service.mean() == pytest.approx(2 * MS * 1.4)
    assert work.cpu_share == pytest.approx(1.0)
    assert slowed.stage("src") == net.stage("src") and slowed.stage("sink") == net.stage("sink")
    r = simulate(slowed)
    assert r.runq["work"] == pytest.approx(0.0, abs=1e-6)
    assert r.cpu["work"] == pytest.approx(100 * 2.8 * MS)
    # A bottleneck that sleeps is busy all along too, and waits for a core when woken: its
    # service is left as it is, however long it waited (a 1 ms sleeper beside a busy core
    # waited 767 % of its CPU time, and stretched, its model ran 12 % slow and refused itself).
    sleeper = replace(net, stages=tuple(replace(s, cpu_share=0.02) if s.name == "work" else s
                                        for s in net.stages))  # fmt: skip
    runner["work"]["runq_ns"] = 7.67 * 200 * MS
    kept, said = core_waits(sleeper, runner, shares)
    assert said == {} and kept.stage("work") == sleeper.stage("work")


def test_a_stretched_thread_takes_as_long_as_it_did_though_the_stretch_slows_the_rest() -> None:
    """The monitor's load follows the rate: a stage slowed makes fewer items a second, so it
    waits for its one core less often, and one stretch by the unstretched model's waits leaves
    it short (here 6 % of its time). The stretch is a fixed point: with the model's own waits,
    CPU time and waits together are what the run took."""
    from streamscope.analysis.corewaits import core_waits

    ms = np.array([MS])
    net = Network(
        (StageModel("src", 0.01 * ms, cpu_share=1.0, items=400, interpreter="p"),
         StageModel("work", 2 * ms, cpu_share=1.0, interpreter="q")),
        (ChannelModel("src -> work", "src", "work", 4),),
        cores=1, monitor_ns_per_item=0.5 * MS,
    )  # fmt: skip
    cpu = 400 * 2 * MS
    slowed, said = core_waits(net, {"work": {"cpu_ns": cpu, "runq_ns": 0.8 * cpu}},
                              {"work": (1.0, 0.0, 0.0)})  # fmt: skip
    assert said["work"][0] == pytest.approx(0.8)
    r = simulate(slowed)
    assert (r.cpu["work"] + r.runq["work"]) / cpu == pytest.approx(1.8, rel=0.01)


def test_code_that_computes_all_along_is_simulated_at_its_cpu_time_per_item() -> None:
    """A pure-Python stage's wall samples, most at its 3 ms of CPU and a few preempted to 7 ms;
    the items whose CPU time was read (one in twenty) were preempted more than the rest, so
    taking their run-queue share out of every sample leaves the samples short of the CPU time:
    they are brought up to it. Compiled code on several cores (CPU beyond wall) is only
    brought down."""
    from streamscope.analysis.corewaits import service_samples

    wall = np.array([3 * MS] * 95 + [7 * MS] * 5)
    pool, share = service_samples(wall, 3 / 3.6, 0.25, 3 * MS, one_core=True)
    assert share == 1.0 and pool.mean() == pytest.approx(3 * MS)
    assert pool.max() / pool.min() == pytest.approx(7 / 3)  # the shape kept
    pool, share = service_samples(wall, 1.0, 0.0, 6 * MS, one_core=False)
    assert share == 1.0 and pool.mean() == pytest.approx(wall.mean())
    pool, share = service_samples(wall, 0.2, 0.25, 0.6 * MS, one_core=True)  # sleeps: kept
    assert share == 0.2 and np.array_equal(pool, wall)


def _gil_crunch(write_share: float, write_ms: float = 0.03) -> Network:
    """read -> crunch -> write on one interpreter: crunch computes 3 ms an item holding the
    lock; read and write take little, write ``write_share`` of it CPU time."""
    return Network(
        (StageModel("read", np.array([0.01 * MS]), cpu_share=1.0, items=300),
         StageModel("crunch", np.array([3 * MS]), cpu_share=1.0),
         StageModel("write", np.array([write_ms * MS]), cpu_share=write_share, ratio=0)),
        (ChannelModel("read -> crunch", "read", "crunch", 8),
         ChannelModel("crunch -> write", "crunch", "write", 8)),
        cores=2,
    )  # fmt: skip


def test_a_stage_that_waited_a_little_an_item_waited_for_the_lock_not_asleep() -> None:
    """A light stage beside one that computes holding the lock, measured waiting half its few
    microseconds an item (for the lock: its code never lets it go): taken for a sleep, the model
    has it want the lock back after each and wait up to a switch interval, busy most of the
    time, and only a smaller share of CPU time held would reproduce its states. The run's truth
    here is the network whose light stage computes all along (its states, its rate): the
    calibration keeps the whole lock and takes the waits for lock waits."""
    from streamscope.analysis.whatif.runmodel import _calibrate_locks, rate_of

    truth = simulate(_gil_crunch(1.0, 0.015), seed=1)
    shares = {s: tuple(float(truth.shares(s)[k]) for k in (BUSY, BLOCKED_IN, BLOCKED_OUT))
              for s in ("read", "crunch", "write")}  # fmt: skip
    rate = rate_of(_gil_crunch(1.0, 0.015), truth, False)
    net, locks, waited = _calibrate_locks(_gil_crunch(0.5), shares, rate)
    assert locks == {"main": 1.0} and waited == ["write"], (locks, waited)
    assert net.stage("write").cpu_share == 1.0
    assert float(net.stage("write").service.mean()) == pytest.approx(0.015 * MS)
    # a stage that sleeps longer than a switch interval an item keeps its sleep
    net, locks, waited = _calibrate_locks(_gil_crunch(0.1, 8.0), shares, rate)
    assert waited == [] and net.stage("write").cpu_share == 0.1
