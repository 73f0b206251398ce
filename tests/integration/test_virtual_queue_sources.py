"""Virtual queues across the emulated device for sources whose gaps are not independent: a fast
subset of ``benchmarks/bench_vq_sources.py`` (real runs, the application's own ground truth).

The device summarises its insertions per sub-window beside the histograms; the model used
places insertions from that profile, and the paper's renewal model (i.i.d. gaps) is kept beside
it with a self-check that now tests the i.i.d. assumption itself.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

import pytest

import streamscope as ss
from oracles import example

QUERY = "occupancy(source -> server): mean, max, histogram every 200ms"


def _run(tmp: Path, arrivals: str, rho: float, seconds: float, seed: int = 1) -> dict[str, Any]:
    mod = example("vq_mm1_hw2sw")  # the source on the device: it reduces the producer's side
    items = int(1000 * rho * seconds)
    p = mod.pipeline(["--arrivals", arrivals, "--rho", str(rho), "--items", str(items),
                      "--seed", str(seed)])  # fmt: skip
    out = tmp / f"{arrivals}.duckdb"
    res = ss.run(p, [QUERY], ss.RunOptions(out=out, overwrite=True, ground_truth=True))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        (vq,) = run.virtual_queues()
    return vq


def _ratios(vq: dict[str, Any]) -> tuple[float, float]:
    """Mean W1 to the truth over mean true occupancy: of the model used, of the renewal model."""
    fr = [f for f in vq["frames_detail"] if f["w1_truth_items"] is not None]
    assert fr
    truth = statistics.mean(f["truth_mean"] for f in fr)
    ren = [f["w1_truth_renewal_items"] for f in fr if f["w1_truth_renewal_items"] is not None]
    return statistics.mean(f["w1_truth_items"] for f in fr) / truth, statistics.mean(ren) / truth


def test_on_off_bursts_with_idle_gaps_longer_than_a_frame(tmp_path: Path) -> None:
    """The issue's source: dense bursts of 60 items, idle ~280 ms between them (frames of 200
    ms). i.i.d. gaps make bursts of geometric size at random places: the renewal estimate is
    off by about the whole occupancy (seeds 1-10 on a quiet machine: 0.7 to 7 times it; 0.43
    once in a fresh clone beside a busy core, whose pauses blur the bursts it misses); the
    profile keeps each burst where it was, several times closer to the truth over the run.
    (Closer frame by frame on average too, 11 to 85 times in twelve runs beside one or two CPU
    hogs; but one frame that a pause of the machine blurs moves that mean several-fold: 3.8
    times once in a fresh clone beside a hog and the suite's other worker, the profile's
    error 0.17 of the occupancy, within its bound. The run's distribution is the comparison.)"""
    vq = _run(tmp_path, "onoff", 0.2, 3.0)
    modelled = [f for f in vq["frames_detail"] if f["arrivals"] is not None]
    assert modelled and all(f["arrivals"] == "profile" for f in modelled)
    used, renewal = _ratios(vq)
    assert used <= 0.2 and renewal > used, (used, renewal)
    assert vq["w1_truth_items"] < 0.25 * vq["w1_truth_renewal_items"]


def test_periodic_bursts_reject_the_renewal_model_frame_by_frame(tmp_path: Path) -> None:
    vq = _run(tmp_path, "periodic", 0.6, 2.0)
    ps = [f["dependence_p"] for f in vq["frames_detail"] if f["dependence_p"] is not None]
    assert len(ps) >= 6
    # Frame by frame the test works at its resolution (p-values from about a hundred
    # replications: 0.01 at best), and a busy machine blurs the bursts' period: at least three
    # frames at p < 0.05, which an i.i.d. source of ten frames reaches in one run in 90.
    assert sum(p < 0.05 for p in ps) >= 3, ps
    assert vq["renewal_verdict"] == "rejected"
    assert vq["dependence_p"] is not None and vq["dependence_p"] < 0.025
    # The profile's model, on one seed beside a busy core (whose pauses blur the bursts the
    # profile keeps): within 0.3 of the mean occupancy (0.24 seen), and the renewal model
    # further off still (1.2 there).
    used, renewal = _ratios(vq)
    assert used <= 0.3 and renewal >= 2 * used, (used, renewal)


@pytest.mark.parametrize("arrivals", ["exp", "h2"])
def test_iid_sources_pass_the_dependence_test(tmp_path: Path, arrivals: str) -> None:
    vq = _run(tmp_path, arrivals, 0.6, 2.0)
    ps = [f["dependence_p"] for f in vq["frames_detail"] if f["dependence_p"] is not None]
    assert len(ps) >= 6
    assert sum(p < 0.025 for p in ps) <= 2
    used, renewal = _ratios(vq)
    # each frame's figures in the message: a frame a pause of the machine blurred is told
    # from a model that is off
    frames = [{k: f[k] for k in ("truth_mean", "w1_truth_items", "w1_truth_renewal_items",
                                 "predicted_mean", "band_items", "decided_by", "items_in")}
              for f in vq["frames_detail"]]  # fmt: skip
    assert used <= 0.2 and renewal <= 0.35, (used, renewal, frames)
