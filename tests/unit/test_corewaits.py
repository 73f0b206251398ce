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
    meas, sim, held = out["work"]
    assert meas == measured and abs(sim - measured) > RUNQ_MARGIN and not held
    assert _per_item(made) == pytest.approx(1.0e6 * (1 + measured), rel=0.03)
    assert abs(_per_item(net) - 1.0e6 * (1 + measured)) > 0.03 * 1.0e6  # unchanged, it missed


def _sleeper(cpu_ms: float, sleep_ms: float) -> Network:
    """A stage computing ``cpu_ms`` and sleeping ``sleep_ms`` an item, 300 items, on two cores
    beside 0.95 cores of other load."""
    src = StageModel("src", np.array([1.0e4]), cpu_share=1.0, items=300)
    work = StageModel("work", np.array([(cpu_ms + sleep_ms) * 1e6]),
                      cpu_share=cpu_ms / (cpu_ms + sleep_ms))  # fmt: skip
    sink = StageModel("sink", np.array([1.0e4]), cpu_share=1.0)
    chans = (ChannelModel("a", "src", "work", 4), ChannelModel("b", "work", "sink", 4))
    return Network((src, work, sink), chans, cores=2, background_cores=0.95)


def _per_300(n: Network) -> float:
    return simulate(n, seed=7).end_ns / 300


def test_a_stage_that_sleeps_loses_the_waits_the_model_makes_on_top_of_its_own() -> None:
    # A stage that computes 3 ms and sleeps 10 ms an item, busy all along, beside 0.95 cores
    # of other load that in the run kept to the other core: its thread waited 5 % of its CPU
    # time for a core, which its samples hold (13.15 ms). The model's load, at random, would
    # make it wait some 30 % more on top, its rate 8 % under the run's beside a CPU hog. Its
    # CPU time is shrunk until the model's waits add nothing to its samples.
    shares = {"work": (1.0, 0.0, 0.0)}  # busy all along: its sleep is its work
    for waited in (0.05, 2.0):  # and woken late, far more than the model makes: the same
        net = _sleeper(3.0 * (1 + waited), 10.0)
        runner = {"work": {"cpu_ns": 300 * 3.0e6, "runq_ns": waited * 300 * 3.0e6}}
        made, out = core_waits(net, runner, shares)
        meas, sim, held = out["work"]
        assert meas == pytest.approx(waited) and held and sim > RUNQ_MARGIN
        truth = 10.0e6 + 3.0e6 * (1 + waited)  # its sleep, its CPU time and the run's waits
        assert _per_300(made) == pytest.approx(truth, rel=0.02)
        assert _per_300(net) > truth * 1.02  # the model alone: slower than the run


def test_a_stage_whose_waits_were_taken_out_gets_them_back_though_it_sleeps_too() -> None:
    # The same stage beside a load on and off: it waited 2.5 ns for a core per ns of CPU, so
    # much that its code counts as computing (``unqueued`` took the waits out: 3 ms of CPU and
    # 10 asleep are left). The model's load at random makes it wait less: its CPU time is
    # stretched until, with the model's waits, it takes as long as the run did.
    net = _sleeper(3.0, 10.0)
    runner = {"work": {"cpu_ns": 300 * 3.0e6, "runq_ns": 2.5 * 300 * 3.0e6}}
    shares = {"work": (1.0, 0.0, 0.0)}
    made, out = core_waits(net, runner, shares, frozenset({"work"}))
    meas, sim, held = out["work"]
    assert meas == pytest.approx(2.5) and sim < 2.5 - RUNQ_MARGIN and not held
    truth = 10.0e6 + 3.0e6 * 3.5
    assert _per_300(made) == pytest.approx(truth, rel=0.03)
    assert _per_300(net) < truth * 0.9  # the model alone: faster than the run
    assert core_waits(net, runner, shares)[1]["work"][2]  # not taken out: held, shrunk
