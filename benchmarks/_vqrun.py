"""One monitored run of a virtual-queue example with its ground truth, read back: what the
virtual-queue benchmarks (``bench_vq_sources``, ``bench_vq_battery``) each make of it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import streamscope as ss


def truth_frames(
    pipeline: ss.Pipeline, queries: Sequence[str], out: Path, label: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run ``pipeline`` with ``queries`` and the ground truth on; its one virtual queue (the
    run's figures) and the frames that have both an estimate and a truth. Exits, naming
    ``label``, when the run did not complete or no frame was estimated."""
    res = ss.run(pipeline, list(queries), ss.RunOptions(out=out, overwrite=True, ground_truth=True))
    if res.status != "completed":
        raise SystemExit(f"{label}: {res.status}: {res.error}")
    with ss.load(out) as run:
        (vq,) = run.virtual_queues()
    frames = [
        f for f in vq["frames_detail"]
        if f["w1_truth_items"] is not None and f["truth_mean"] is not None
    ]  # fmt: skip
    if not frames:
        raise SystemExit(f"{label}: no frame was estimated")
    return vq, frames
