"""The virtual-queue verdict on a run of ``benchmarks/bench_vq_battery.py`` (a real run, the
application's own record of every item as the truth): a source whose gaps depend on each other is
estimated within the tolerance or rejected.

Whether an accurate estimate is accepted is a rate, not a property of one run: the check is built
to reject at most 5 % of accurate runs (a false alarm), and beside busy cores it comes near that
(the case unlike the examples, hyperexponential gaps on a bulk-32 bus: 0 of 15 runs beside one
CPU hog, 1 of 20 beside two), so a test of one run would fail one suite in ten or so. The
benchmark measures that rate over many runs against its target. (The frame a device's source
stops in is held by ``tests/unit/test_virtual.py`` and measured by the benchmark: where a run's
source stops falls with the machine's load, at a frame's very end at times.)"""

from __future__ import annotations

from pathlib import Path

from oracles import benchmark

B = benchmark("bench_vq_battery")


def _cell(source: str, bus: str) -> tuple[object, object]:
    src = next(s for s in B.SOURCES if s.label == source)
    return src, next(b for b in B.BUSES if b.label == bus)


def test_a_dependent_source_is_estimated_within_tolerance_or_rejected(tmp_path: Path) -> None:
    o = B.one_run(*_cell("mmpp", "bulk 16"), 1, tmp_path / "r.duckdb")
    print(o.run, dict(o.decided), o.ratio)
    assert o.accurate or not o.accepted
