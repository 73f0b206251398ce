"""Time and size of ``streamscope report`` for a run of 100 frames x 20 queries.

In: a synthetic run file written with the store's own ``DuckDBStore``: a chain of six stages
(five channels) and 20 queries (occupancy with a 65-bin histogram, throughput, latency with box
and p99, duty), 100 frames of 10 ms each. Out: the wall time and size of ``write_report`` (the
whole page: reading the run, analysis, SVG graph, every figure, plotly.js inlined once), and
next to it the peer: plotly alone writing the same figures, one ``go.Figure(spec).to_html(
include_plotlyjs=False)`` per figure plus the bundle once; ratios and the targets (< 5 s, < 10 MB).

    python benchmarks/bench_report.py [--quick] [--reps N]
"""

from __future__ import annotations

import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from _harness import machine, parse_args, table
from streamscope.aggregate.points import (
    DutyPoint,
    FrameResult,
    HistogramPoint,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.core.topology import ChannelInfo, ResourceInfo, StageInfo, Topology
from streamscope.report import write_report
from streamscope.store.writer import DuckDBStore, QueryRecord, RunMeta

TARGET_S = 5.0
TARGET_MB = 10.0
FRAMES = 100
FRAME_NS = 10_000_000
STAGES = ("src", "parse", "enrich", "score", "format", "sink")


def synth_run(path: Path, frames: int = FRAMES, seed: int = 0) -> int:
    """Write the run; returns its number of queries (20)."""
    rng = np.random.default_rng(seed)
    channels = [f"{a} -> {b}" for a, b in zip(STAGES, STAGES[1:], strict=False)]
    topo = Topology(
        "bench",
        (ResourceInfo("main", "thread"),),
        tuple(
            StageInfo(s, "main", "source" if i == 0 else "sink" if i == 5 else "stage")
            for i, s in enumerate(STAGES)
        ),
        tuple(ChannelInfo(c, *c.split(" -> "), capacity=64) for c in channels),
    )
    queries: list[QueryRecord] = []
    for c in channels:
        n = len(queries)
        every = " every 10ms"
        queries += [
            QueryRecord(n, f"occupancy({c}): mean, max, histogram(bins=0..64){every}",
                        "occupancy", "items", FRAME_NS, (c,), ("mean", "max", "histogram")),
            QueryRecord(n + 1, f"throughput({c}): mean, max{every}", "throughput", "items/s",
                        FRAME_NS, (c,), ("mean", "max")),
            QueryRecord(n + 2, f"latency({c}): box, p99{every}", "latency", "ns", FRAME_NS,
                        (c,), ("quantiles", "quantiles")),
        ]  # fmt: skip
    for s in STAGES[1:]:
        queries.append(
            QueryRecord(len(queries), f"state({s}): duty every 10ms", "state", "state",
                        FRAME_NS, (s,), ("duty",))
        )  # fmt: skip
    results: list[FrameResult] = []
    edges = tuple(float(e) for e in range(66))
    for q in queries:
        target = q.targets[0]
        for f in range(frames):
            t0 = f * FRAME_NS
            if q.metric == "occupancy":
                w = rng.dirichlet(np.ones(65)) * FRAME_NS
                mean = float((w * np.arange(65)).sum() / FRAME_NS)
                pts: tuple[object, ...] = (
                    ScalarPoint("mean", mean),
                    ScalarPoint("max", float(np.flatnonzero(w > 1e4).max())),
                    HistogramPoint(edges, tuple(float(x) for x in w)),
                )
            elif q.metric == "throughput":
                m = float(rng.uniform(800, 1200))
                pts = (ScalarPoint("mean", m), ScalarPoint("max", m * 1.3))
            elif q.metric == "latency":
                qs = np.sort(rng.exponential(2e5, 5)) + 1e4
                pts = (
                    QuantilesPoint((0.0, 0.25, 0.5, 0.75, 1.0), tuple(float(x) for x in qs)),
                    QuantilesPoint((0.99,), (float(qs[-1] * 0.95),), "quantiles"),
                )
            else:
                d = rng.dirichlet(np.ones(4))
                pts = (
                    DutyPoint(
                        ("idle", "busy", "blocked_in", "blocked_out"), tuple(float(x) for x in d)
                    ),
                )
            results.append(
                FrameResult(q.id, target, f, t0, t0 + FRAME_NS, FRAME_NS, pts)  # type: ignore[arg-type]
            )
    meta = RunMeta("bench", "bench", "bench", "bench", (), "host", time.time_ns(), FRAME_NS, "0")
    with DuckDBStore(path, overwrite=True, checkpoint_every=0) as store:
        store.begin(meta, topo, queries)
        store.write_frames(results)
        store.finish("completed", None, time.time_ns(), frames * FRAME_NS)
    return len(queries)


def figures_of(html: str) -> dict[str, dict[str, object]]:
    m = re.search(r'<script type="application/json" id="ss-figures">(.*?)</script>', html, re.S)
    assert m is not None, "the report has no figure block"
    figs: dict[str, dict[str, object]] = json.loads(m.group(1))
    return figs


def peer(figs: dict[str, dict[str, object]]) -> int:
    """plotly alone: each figure through ``go.Figure(...).to_html``, and the bundle once."""
    size = len(get_plotlyjs().encode())
    for spec in figs.values():
        size += len(go.Figure(spec).to_html(include_plotlyjs=False, full_html=False).encode())
    return size


def main() -> int:
    args = parse_args(__doc__ or "")
    reps = args.reps or (1 if args.quick else 3)
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "bench.duckdb"
        t = time.perf_counter()
        nq = synth_run(run)
        synth_s = time.perf_counter() - t
        ours: list[float] = []
        theirs: list[float] = []
        size = peer_size = 0
        figs: dict[str, dict[str, object]] = {}
        for _ in range(reps):
            t = time.perf_counter()
            summary = write_report(run, Path(tmp) / "report.html")
            ours.append(time.perf_counter() - t)
            size = summary.bytes
            html = (Path(tmp) / "report.html").read_text()
            figs = figures_of(html)
            if not figs:
                raise SystemExit("the report drew no figure")
            t = time.perf_counter()
            peer_size = peer(figs)
            theirs.append(time.perf_counter() - t)
    o, p = statistics.median(ours), statistics.median(theirs)
    print(f"bench_report: {FRAMES} frames x {nq} queries ({len(figs)} figures), {machine()}")
    print(f"synthetic run written in {synth_s:.2f} s; {reps} repetition(s), medians")
    print(
        table(
            ["variant", "time (s)", "size (MB)"],
            [
                ["streamscope write_report (whole page)", f"{o:.3f}", f"{size / 1e6:.2f}"],
                ["plotly go.Figure(...).to_html per figure", f"{p:.3f}", f"{peer_size / 1e6:.2f}"],
            ],
        )
    )
    print(f"ratio time: streamscope / plotly = {o / p:.2f}x; size ratio {size / peer_size:.2f}x")
    ok_t, ok_s = o < TARGET_S, size / 1e6 < TARGET_MB
    print(
        f"target: < {TARGET_S:.0f} s -> {o:.2f} s ({'met' if ok_t else 'MISSED'}); "
        f"< {TARGET_MB:.0f} MB -> {size / 1e6:.2f} MB ({'met' if ok_s else 'MISSED'})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
