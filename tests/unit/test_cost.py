"""The per-event probe costs an agent measures at start: every class, positive, finite."""

from __future__ import annotations

import math
import time

from streamscope.probes.cost import COST_CLASS, cost_class, measure_costs


def test_every_probe_class_gets_a_positive_cost() -> None:
    costs = measure_costs(time.perf_counter_ns, n=500, repeats=2)
    assert set(costs) >= set(COST_CLASS.values()) | {"central"}
    for name, ns in costs.items():
        assert math.isfinite(ns) and ns > 0, name
    # a stage-state change does more than a bare counter increment
    assert costs["state"] > costs["counter"]


def test_a_slower_clock_costs_more_per_event() -> None:
    def slow_clock() -> int:
        t = time.perf_counter_ns()
        while time.perf_counter_ns() - t < 2000:
            pass
        return t

    fast = measure_costs(time.perf_counter_ns, n=300, repeats=2)
    slow = measure_costs(slow_clock, n=300, repeats=2)
    # every class that reads the clock once per event pays at least the 2 us spin
    for name in ("channel", "ring", "state", "central"):
        assert slow[name] > fast[name] + 1000, name


def test_cost_classes() -> None:
    assert cost_class("sampler", "centralized") == "central"
    assert cost_class("sampler", "distributed") == "ring"
    assert cost_class("tail") == cost_class("head") == "channel"
    assert cost_class("trace") == "trace"
