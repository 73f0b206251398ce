"""A virtual queue's rows in the run file: levels per frame, frame rows, the run's verdict, and
(validation runs only) the distance of each frame's estimate to the true occupancy.

In: what ``VirtualQueue`` gathered per frame (its row, its level fractions, its models'
verdicts and estimates) and, for validation, the true insertion and removal times. Out: rows of
the ``vq_level``, ``vq_frame`` and ``virtual_queue`` tables through the run's table sink.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from streamscope.core.numeric import dot
from streamscope.core.tablerows import TableRows, TableSink
from streamscope.model import combine_frames, occupancy_from_events
from streamscope.model import w1_items as w1
from streamscope.monitor.vqmodel import ALPHA, F64, FrameModels


class VQTables:
    """One virtual queue's table rows (mutable: frame rows wait for the truth in validation
    runs)."""

    def __init__(
        self, name: str, query_ids: list[int], frame_ns: int, on_table: TableSink | None
    ) -> None:
        self.name = name
        #: The rows are the channel's, written once under its first occupancy query.
        self.query_ids = query_ids[:1]
        self.frame_ns = frame_ns
        self.on_table = on_table
        self.frame_rows: list[dict[str, Any]] = []
        self._truth_w1: list[tuple[float, float, float]] = []

    def write_levels(self, frame: int, levels: dict[str, F64]) -> None:
        if self.on_table is None or not levels:
            return
        rows: dict[str, list[Any]] = {
            k: [] for k in ("query_id", "target", "frame", "series", "level", "fraction")
        }
        for query_id in self.query_ids:
            for series, frac in levels.items():
                n = len(frac)
                rows["query_id"] += [query_id] * n
                rows["target"] += [self.name] * n
                rows["frame"] += [frame] * n
                rows["series"] += [series] * n
                rows["level"] += list(range(n))
                rows["fraction"] += [float(x) for x in frac]
        self.on_table(TableRows("vq_level", rows))

    def write_frames(self) -> None:
        if self.on_table is None or not self.frame_rows:
            return
        cols: dict[str, list[Any]] = {}
        for query_id in self.query_ids:
            for r in self.frame_rows:
                full = {"query_id": query_id, "target": self.name, **r}
                for k, v in full.items():
                    cols.setdefault(k, []).append(v)
        self.on_table(TableRows("vq_frame", cols))
        self.frame_rows = []

    def write_run(self, models: FrameModels) -> None:
        if self.on_table is None:
            return
        run = combine_frames(models.verdicts, ALPHA)
        pooled = models.dependence.result()
        renewal = combine_frames(models.renewal_verdicts, ALPHA, pooled)
        w1_truth = np.array(self._truth_w1, dtype=np.float64).reshape(-1, 3)
        means: list[float | None] = [
            float(np.nanmean(c)) if np.isfinite(c).any() else None for c in w1_truth.T
        ]
        for query_id in self.query_ids:
            self.on_table(TableRows(
                "virtual_queue",
                {
                    "query_id": [query_id], "target": [self.name], "model": ["tandem"],
                    "verdict": [run.verdict], "frames": [run.frames],
                    "frames_rejected": [run.frames_rejected], "alpha": [run.alpha],
                    "p_value": [run.p_value],
                    "frames_distinguishable": [run.frames_distinguishable],
                    "tolerance": [models.tolerance],
                    "w1_items": [models.w1_sum / len(models.verdicts) if models.verdicts else None],
                    "w1_truth_items": [means[0]], "w1_truth_ideal_items": [means[1]],
                    "renewal_verdict": [renewal.verdict if renewal.frames else None],
                    "dependence_p": [pooled.p_value if pooled else None],
                    "w1_truth_renewal_items": [means[2]],
                },
            ))  # fmt: skip

    def truth(
        self, truth_dir: str, end_ns: int, t0_ns: float, key: int, models: FrameModels
    ) -> None:
        """The true occupancy per frame (validation only; never an input to the estimate)."""
        idx = key // 2
        ins_path, out_path = Path(truth_dir) / f"{idx}-in.npy", Path(truth_dir) / f"{idx}-out.npy"
        if not (ins_path.is_file() and out_path.is_file()):
            return
        a = np.load(ins_path).astype(np.float64) - t0_ns
        d = np.load(out_path).astype(np.float64) - t0_ns
        if d.size < a.size:  # items never removed stay to the end
            d = np.concatenate((d, np.full(a.size - d.size, float(end_ns))))
        d = d[: a.size]
        by_frame = {e.frame: e for e in models.estimates}
        for r in self.frame_rows:
            f = r["frame"]
            lo, hi = f * self.frame_ns, min((f + 1) * self.frame_ns, end_ns)
            if hi <= lo:
                continue
            levels, ns = occupancy_from_events(a, d, float(lo), float(hi))
            true = ns / ns.sum() if ns.sum() > 0 else ns
            r["truth_mean"] = dot(levels, true)
            e = by_frame.get(f)
            if e is not None:
                r["w1_truth_items"] = w1(e.whole, true)
                r["w1_truth_ideal_items"] = w1(e.ideal, true)
                r["w1_truth_renewal_items"] = None if e.renewal is None else w1(e.renewal, true)
                self._truth_w1.append(
                    (r["w1_truth_items"], r["w1_truth_ideal_items"],
                     np.nan if e.renewal is None else r["w1_truth_renewal_items"])
                )  # fmt: skip
            self.write_levels(f, {"truth": true})
