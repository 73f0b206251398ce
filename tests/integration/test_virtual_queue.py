"""Virtual queues end to end: an emulated device, its link, on-device reduction, the model and
its self-check, against the ground truth each run records (real processes, real run files)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from oracles import example
from streamscope.aggregate.points import ScalarPoint

ROOT = Path(__file__).resolve().parents[2]


def _run(name: str, tmp: Path, *args: str, mode: str = "inline") -> ss.Run:
    mod = example(name)
    out = tmp / f"{name}.duckdb"
    res = ss.run(
        mod.pipeline(["--items", "1200", *args]),
        mod.QUERIES,
        ss.RunOptions(out=out, overwrite=True, ground_truth=True, mode=mode),
    )
    assert res.status == "completed", res.error
    return ss.load(out)


def test_sw2hw_tandem_model_follows_the_truth_where_the_ideal_queue_fails(tmp_path: Path) -> None:
    with _run("vq_mm1_sw2hw", tmp_path, mode="process") as run:
        (vq,) = run.virtual_queues()
        assert vq["target"] == "source -> server" and vq["model"] == "tandem"
        assert vq["verdict"] in ("consistent", "rejected") and vq["frames"] >= 1
        # Seed Fig. 6 against Fig. 7: the bulk bus makes the ideal queue far too short.
        assert vq["w1_truth_items"] < vq["w1_truth_ideal_items"]
        frames = [f for f in vq["frames_detail"] if f["verdict"] is not None]
        # each checked frame's threshold is its null quantile widened by its clock bias, both
        # finite (a frame whose device clock is unbounded gets no verdict); the quantile can be 0
        assert frames
        for f in frames:
            assert f["null_quantile_items"] >= 0 and 0 <= f["clock_bias_items"] < float("inf")
            assert f["threshold_items"] == pytest.approx(
                f["null_quantile_items"] + f["clock_bias_items"]
            )
        # Only summaries crossed the link: no raw record of the device-side taps was kept.
        device_probes = [p.id for p in run.topology.probes if p.domain != "host"]
        assert device_probes
        ids = ", ".join(map(str, device_probes))
        _, rows = run.sql(f"SELECT count(*) FROM record WHERE probe_id IN ({ids})")
        assert rows[0][0] == 0
        # The query's own aggregations are answered from the predicted occupancy.
        results = run.results(vq["query_id"], "source -> server")
        means = [p.value for r in results for p in r.points if getattr(p, "stat", "") == "mean"]
        predicted = [f["predicted_mean"] for f in vq["frames_detail"]]
        assert means and np.allclose(
            [m for m, p in zip(means, predicted, strict=True) if p is not None],
            [p for p in predicted if p is not None],
        )


def test_hw2sw_runs_with_the_device_as_producer(tmp_path: Path) -> None:
    with _run("vq_mm1_hw2sw", tmp_path) as run:
        (vq,) = run.virtual_queues()
        assert vq["w1_truth_items"] < vq["w1_truth_ideal_items"]
        _, rows = run.sql("SELECT DISTINCT series FROM vq_level ORDER BY series")
        assert [r[0] for r in rows] == [
            "head", "head_predicted", "ideal", "predicted", "renewal", "tail", "tail_predicted",
            "truth",
        ]  # fmt: skip


def test_cli_show_json_carries_verdict_and_distances(tmp_path: Path) -> None:
    out = tmp_path / "vq.duckdb"
    app = ROOT / "examples" / "vq_md1_sw2hw.py"
    cmd = [sys.executable, "-m", "streamscope", "run", str(app), "--out", str(out), "--quiet",
           "--ground-truth", "--vq-tolerance", "0.25", "--", "--items", "800"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    show = subprocess.run(
        [sys.executable, "-m", "streamscope", "show", str(out), "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = subprocess.run(
        [sys.executable, "-m", "streamscope", "show", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "COLUMNS": "200"},  # wide enough that no cell wraps mid-phrase
    ).stdout
    assert "virtual queues" in text and "source -> server" in text and "ideal queue" in text
    # Which arrivals model the frames used is said (the device counted insertions per window).
    assert "arrivals" in text and "profile" in text
    doc = json.loads(show.stdout)
    (vq,) = doc["virtual_queues"]
    assert vq["verdict"] in ("consistent", "rejected")
    assert isinstance(vq["w1_items"], float) and isinstance(vq["w1_truth_items"], float)
    assert vq["frames"] and {"verdict", "w1_items", "w1_truth_items"} <= set(vq["frames"][0])
    # The tolerance asked for decides; each checked frame says which part of the check did.
    assert vq["tolerance"] == 0.25 and "frames decided by" in text
    checked = [f for f in vq["frames"] if f["verdict"] is not None]
    assert checked and sum(vq["decided_by"].values()) == len(checked)
    for f in checked:
        assert f["tolerance_items"] == max(0.25 * f["predicted_mean"], 1.0)
        told = f["w1_items"] > f["threshold_items"]
        over = f["w1_items"] - f["clock_bias_items"] > f["tolerance_items"]
        assert (f["verdict"] == "rejected") == (f["decided_by"] in ("discrepancy", "dependence"))
        assert (f["decided_by"] == "discrepancy") == (told and over)
        assert f["band_items"] >= f["w1_items"] and f["band_items"] >= f["null_quantile_items"]
    link = next(c for c in doc["channels"] if c["name"] == "source -> server")
    assert link["transport"] == "link" and link["bulk_size"] == 16


def test_occupancy_queries_on_one_link_must_share_a_frame() -> None:
    p = example("vq_mm1_sw2hw").pipeline(["--items", "10"])
    queries = [
        "occupancy(source -> server): mean every 1s",
        "occupancy(source -> server): max every 2s",
    ]
    with pytest.raises(ss.ConfigError, match="same frame"):
        ss.run(p, queries)


def _explode(x: int) -> int:
    if x == 300:
        raise ValueError("bad item 300")
    return x


def test_a_device_stage_that_raises_fails_the_run_cleanly(tmp_path: Path) -> None:
    dev = ss.EmulatedDevice("accel", bulk_size=8, transfer_us=50)
    p = ss.Pipeline("boom")
    p.add("source", range(100_000))
    p.add("work", _explode, resource=dev)
    p.add("sink", lambda x: None)
    p.chain("source", "work", "sink", capacity=32)
    out = tmp_path / "boom.duckdb"
    res = ss.run(p, ["occupancy(source -> work): mean every 500ms"], ss.RunOptions(out=out))
    assert res.status == "failed" and res.exit_code == 1
    assert res.stage == "work" and "bad item 300" in (res.error or "")
    assert "test_virtual_queue.py" in (res.error or "")
    with ss.load(out) as run:
        assert run.status == "failed"


def _same(x: int) -> int:
    return x


def test_totals_across_the_device_count_every_item_when_records_are_refused(
    tmp_path: Path,
) -> None:
    """Tiny rings on the host and on the device refuse most records; ``count`` and
    ``throughput`` of every channel (host to device, on the device, device to host) still add
    up to the items that went through."""
    n = 20_000
    dev = ss.EmulatedDevice("accel", bulk_size=8, transfer_us=20)
    p = ss.Pipeline("totals")
    p.add("source", range(n))
    p.add("work", _same, resource=dev)
    p.add("work2", _same, resource=dev)
    p.add("sink", lambda x: None)
    p.chain("source", "work", "work2", "sink", capacity=32)
    chans = ["source -> work", "work -> work2", "work2 -> sink"]
    queries = [
        f"{m}({c}): {s} every 100ms"
        for c in chans
        for m, s in (("count", "sum"), ("throughput", "mean"))
    ]
    out = tmp_path / "totals.duckdb"
    res = ss.run(p, queries, ss.RunOptions(out=out, tap_capacity=16, frame_ns=100_000_000))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        assert sum(d.dropped for d in run.drops()) > n, "the rings did not refuse; shrink them"
        for i, c in enumerate(chans):
            inserted = sum(
                p.value or 0.0 for f in run.results(2 * i, c) for p in f.points
                if isinstance(p, ScalarPoint) and p.stat == "sum"
            )  # fmt: skip
            removed = sum(
                (p.value or 0.0) * f.covered_ns / 1e9 for f in run.results(2 * i + 1, c)
                for p in f.points if isinstance(p, ScalarPoint) and p.stat == "mean"
            )  # fmt: skip
            assert (inserted, round(removed)) == (n, n), c
