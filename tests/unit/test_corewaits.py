"""What the what-if model takes out of a stage's service samples for its waits for a core: the
waits spread over code that computes, not those of code that sleeps between its computing."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.analysis.corewaits import COMPUTES, RUNQ_MARGIN, core_waits, unqueued
from streamscope.model.network import ChannelModel, Network, StageModel, simulate


def test_code_that_computes_loses_the_waits_spread_over_its_computing() -> None:
    # Pure Python at 87 % of its wall time, waiting 0.1 ns for a core per ns of CPU: 8.7 % of
    # its samples were waits the simulation makes again, and what is left computes all along.
    pool, share = unqueued(np.array([1000.0, 2000.0]), 0.87, 0.1)
    assert pool.tolist() == pytest.approx([913.0, 1826.0])
    assert share == pytest.approx(0.87 / 0.913)


def test_code_preempted_more_than_it_ran_still_computes() -> None:
    # Pure Python beside two CPU hogs and more: on a core 47.5 % of its wall time, waiting
    # for one 1.1 ns per ns of CPU (52 %): it computes all along, its waits taken out.
    pool, share = unqueued(np.array([3.0e6]), 0.475, 1.1)
    kept = 1 - 1.1 * 0.475
    assert pool.tolist() == pytest.approx([3.0e6 * kept])
    assert share == pytest.approx(0.475 / kept) and share > 0.99


def test_code_that_sleeps_keeps_its_samples_whatever_it_waited() -> None:
    # A 4 ms sleeper whose 40 us of CPU an item came with 0.5 ms of waiting to be woken: the
    # waits are per wake, not per CPU ns; the simulation would not make them again.
    samples = np.array([4.3e6, 4.1e6])
    pool, share = unqueued(samples, 0.01, 12.0)
    assert pool is samples and share == 0.01
    assert unqueued(samples, COMPUTES, 0.0) == (samples, COMPUTES)  # no wait: nothing to take


def _cpu_bound(bg: float) -> Network:
    """One pure-Python stage of 1 ms items on two cores, beside ``bg`` cores of other load."""
    src = StageModel("src", np.array([1.0e4]), cpu_share=1.0, items=400)
    work = StageModel("work", np.array([1.0e6]), cpu_share=1.0)
    sink = StageModel("sink", np.array([1.0e4]), cpu_share=1.0)
    chans = (ChannelModel("a", "src", "work", 4), ChannelModel("b", "work", "sink", 4))
    return Network((src, work, sink), chans, cores=2, background_cores=bg)


def _per_item(net: Network) -> float:
    r = simulate(net, seed=7)
    return r.end_ns / 400


@pytest.mark.parametrize("measured", [0.0, 0.5])
def test_a_stage_busy_all_along_takes_as_long_as_its_waits_for_a_core_made_it(
    measured: float,
) -> None:
    # 0.95 cores of other load at random make the model's stage wait for a core now and then;
    # the run's thread waited not at all (the other load kept to the other core) or half its
    # CPU time: either way the model is made to take what the run took, 1 ms x (1 + waits).
    net = _cpu_bound(0.95)
    runner = {"work": {"cpu_ns": 400e6, "runq_ns": measured * 400e6}}
    shares = {"work": (1.0, 0.0, 0.0)}
    made, out = core_waits(net, runner, shares)
    meas, sim = out["work"]
    assert meas == measured and abs(sim - measured) > RUNQ_MARGIN
    assert _per_item(made) == pytest.approx(1.0e6 * (1 + measured), rel=0.03)
    assert abs(_per_item(net) - 1.0e6 * (1 + measured)) > 0.03 * 1.0e6  # unchanged, it missed


def test_a_stage_that_sleeps_loses_the_waits_the_model_makes_and_the_run_had_not() -> None:
    # A stage that computes 3 ms and sleeps 10 ms an item (CPU share 0.23), beside 0.95 cores
    # of other load that in the run kept to the other core (its thread waited 5 % of its CPU
    # time for a core): the model's load, at random, made it wait some 30 %, its rate 8 %
    # under the run's beside a CPU hog. Its CPU time is shrunk to what, with the model's
    # waits, takes as long as the run's; where the model makes it wait less than the run did
    # (its waits to be woken, which the model leaves out), it is left as it is.
    src = StageModel("src", np.array([1.0e4]), cpu_share=1.0, items=300)
    work = StageModel("work", np.array([13.0e6]), cpu_share=3 / 13)
    sink = StageModel("sink", np.array([1.0e4]), cpu_share=1.0)
    chans = (ChannelModel("a", "src", "work", 4), ChannelModel("b", "work", "sink", 4))
    net = Network((src, work, sink), chans, cores=2, background_cores=0.95)
    shares = {"work": (1.0, 0.0, 0.0)}  # busy all along: its sleep is its work
    runner = {"work": {"cpu_ns": 300 * 3.0e6, "runq_ns": 0.05 * 300 * 3.0e6}}
    made, out = core_waits(net, runner, shares)
    meas, sim = out["work"]
    assert meas == pytest.approx(0.05) and sim > meas + RUNQ_MARGIN
    truth = 10.0e6 + 3.0e6 * 1.05  # its sleep, its CPU time and the run's waits

    def per_item(n: Network) -> float:
        return simulate(n, seed=7).end_ns / 300

    assert per_item(made) == pytest.approx(truth, rel=0.02)
    assert per_item(net) > truth * 1.02  # the model alone: slower than the run
    runner["work"]["runq_ns"] = 2.0 * 300 * 3.0e6  # woken late, far more than the model makes
    same, none = core_waits(net, runner, shares)
    assert same is net and none == {}
