"""What the what-if model takes out of a stage's service samples for its waits for a core: the
waits spread over code that computes, not those of code that sleeps between its computing."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.analysis.corewaits import COMPUTES, unqueued


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

