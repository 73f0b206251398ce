"""The virtual-queue verdict on a few runs of ``benchmarks/bench_vq_battery.py`` (real runs, the
application's own record of every item as the truth): a case unlike the examples, whose estimate is
accurate though its buffers tell the model from the link, is accepted; a source whose gaps depend
on each other is estimated within the tolerance or rejected. (The frame a device's source stops
in is held by ``tests/unit/test_virtual.py`` and measured by the benchmark: where a run's source
stops falls with the machine's load, at a frame's very end at times.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from oracles import benchmark

B = benchmark("bench_vq_battery")


def _cell(source: str, bus: str) -> tuple[object, object]:
    src = next(s for s in B.SOURCES if s.label == source)
    return src, next(b for b in B.BUSES if b.label == bus)


@pytest.mark.parametrize("seed", [1, 2])
def test_an_accurate_estimate_is_accepted_though_told_apart(tmp_path: Path, seed: int) -> None:
    # Hyperexponential gaps (CV^2 4), uniform services, a bulk-32 bus, a device clock at -60
    # ppm: W1 to the truth ~6 % of the occupancy, yet some frames tell the model apart.
    o = B.one_run(*_cell("h2, -60 ppm, uniform", "bulk 32"), seed, tmp_path / "r.duckdb")
    print(o.run, dict(o.decided), o.ratio)
    # Accepted: no false alarm. And the estimate it accepted is close (W1 ~6 % of the mean on
    # a quiet machine; 15.2 % was seen once beside a busy core, a hair over the tolerance):
    # within 20 %, where a wrong model is far off (the ideal queue: ~100 %).
    assert o.accepted, (o.ratio, o.run)
    assert o.ratio <= 0.2, (o.ratio, o.run)


def test_a_dependent_source_is_estimated_within_tolerance_or_rejected(tmp_path: Path) -> None:
    o = B.one_run(*_cell("mmpp", "bulk 16"), 1, tmp_path / "r.duckdb")
    print(o.run, dict(o.decided), o.ratio)
    assert o.accurate or not o.accepted
