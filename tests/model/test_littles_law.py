"""Little's law on every monitored channel of an M/M/1 run: L = lambda * W.

Over a run that starts and ends with empty channels, L = lambda * W holds exactly for any
sample path (integral of occupancy = sum of times in channel), so this checks that the monitor's
occupancy, latency and throughput agree with one another, frame splitting included.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from oracles import example
from streamscope.aggregate.points import FrameResult, ScalarPoint
from streamscope.core.modes import RunMode
from streamscope.runtime import RunOptions, run
from streamscope.store.reader import Run, load
from streamscope.store.writer import InMemoryStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EDGES = ("source -> server", "server -> sink")
FRAME_NS = 500_000_000
ITEMS = 2000
TOLERANCE = 0.02


def queries() -> list[str]:
    out = []
    for edge in EDGES:
        out += [
            f"occupancy({edge}): mean every 500ms",
            f"latency({edge}): sum, count every 500ms",
            f"throughput({edge}): mean every 500ms",
        ]
    return out


def scalar(fr: FrameResult, stat: str) -> float:
    p = fr.point(stat)
    assert isinstance(p, ScalarPoint)
    return 0.0 if p.value is None else p.value


def check_little(r: Run, label: str) -> None:
    for i, edge in enumerate(EDGES):
        occ, lat, thr = (r.results(3 * i + k, edge) for k in range(3))
        assert occ and lat and thr, f"{label} {edge}: missing frames"
        covered_ns = sum(fr.covered_ns for fr in occ)
        # Frames with no time have no mean; every other frame counts by the time it covered.
        area = sum(scalar(fr, "mean") * fr.covered_ns for fr in occ if fr.covered_ns)
        mean_occ = area / covered_ns
        removed = sum(scalar(fr, "count") for fr in lat)
        latency_ns = sum(scalar(fr, "sum") for fr in lat) / removed
        # throughput's mean is a time-weighted mean of windowed rates: rate * time = items.
        removed_thr = sum(scalar(fr, "mean") * fr.covered_ns / 1e9 for fr in thr)
        rate = removed_thr / (covered_ns / 1e9)
        predicted = rate * latency_ns / 1e9
        figures = (
            f"{label} {edge}: L={mean_occ:.5f} items, lambda={rate:.2f}/s x W={latency_ns / 1e6:.4f} "
            f"ms = {predicted:.5f} items (ratio {mean_occ / predicted:.5f}); removed: latency "
            f"count {removed:.0f}, throughput {removed_thr:.1f}; run {covered_ns / 1e9:.3f}s"
        )
        print(figures)
        assert removed == ITEMS, figures
        assert removed_thr == pytest.approx(ITEMS, rel=1e-6), figures
        assert mean_occ == pytest.approx(predicted, rel=TOLERANCE), figures


def argv(resource: str) -> list[str]:
    return [
        "--rho", "0.8",
        "--items", str(ITEMS),
        "--capacity", "64",
        "--seed", "5",
        "--service-ms", "1",
        "--source-resource", resource,
        "--server-resource", resource,
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    ("resource", "mode"), [("thread", "inline"), ("thread", "process"), ("process", "inline")]
)
def test_little(resource: str, mode: str, tmp_path: Path) -> None:
    """Little's law on every channel, stages on ``resource``, the monitor ``mode``."""
    out = tmp_path / "r.duckdb" if mode == "process" else None
    res = run(
        example("mm1").build(argv(resource)),
        queries(),
        RunOptions(frame_ns=FRAME_NS, mode=RunMode(mode), out=out),
    )
    assert res.status == "completed", res.error
    label = f"{resource} stages, {mode} monitor"
    if out is None:
        assert isinstance(res.store, InMemoryStore)
        check_little(Run.from_memory(res.store), label)
    else:
        with load(out) as r:
            check_little(r, label)
