"""A host's map of its ticks to virtual ns: continuous and increasing through every grid it is
given, slewing to each new one no faster than 1 % apart from it, then following it."""

from __future__ import annotations

import numpy as np
import pytest

from streamscope.agents.gridmap import SLEW, GridMap


def test_the_first_grid_is_taken_as_it_is_and_inverted() -> None:
    m = GridMap()
    assert not m.ready
    m.set(1e9, 2.5, 0.0, 1e8)
    x = np.array([1e9, 1e9 + 2.5e6, 3e9])
    assert m.ns(x).tolist() == [0, 1_000_000, 800_000_000]
    assert m.ticks(1_000_000) == pytest.approx(1e9 + 2.5e6)


@pytest.mark.parametrize("offset_ticks", [44e6, -44e6, 3e3])
def test_a_new_grid_is_reached_by_slewing_from_the_last_placed_tick(offset_ticks: float) -> None:
    m = GridMap()
    m.set(0.0, 1.02, 0.0, 1e8)  # a rate 2 % off
    placed = 2e9
    before = m.ns_float(np.array([0.0, 1e9, placed]))
    m.set(offset_ticks, 1.0, placed, 1e8)
    # What was placed keeps its place; the map goes on from there without a jump.
    assert m.ns_float(np.array([0.0, 1e9, placed])).tolist() == before.tolist()
    x = np.linspace(placed - 1e6, placed + 1e10, 20_001)
    y = m.ns_float(x)
    assert np.all(np.diff(y) > 0)
    slope = np.diff(y) / np.diff(x)
    stretch = x[:-1] >= placed
    assert np.all(np.abs(slope[stretch] - 1.0) <= 1.0 / SLEW + 1e-9)
    # ... and from the stretch's end on, it is the new grid.
    jump = abs((placed - offset_ticks) - before[-1])
    end = placed + max(1e8, SLEW * jump)
    after = x[x >= end]
    assert np.allclose(m.ns_float(after), after - offset_ticks, rtol=0, atol=1e-3)
    # The inverse places every ns back on its ticks.
    for t in (5e8, before[-1] + 1e6, float(y[-1])):
        assert m.ns_float(np.array([m.ticks(t)]))[0] == pytest.approx(t, abs=1e-3)
