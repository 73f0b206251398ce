"""Retention (``--keep``): old frames rolled up in a real run file, the whole-run figures and
totals unchanged, the frames per target bounded, the levels aligned and ordered."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamscope.aggregate.points import (
    DropCount,
    DutyPoint,
    FrameResult,
    HistogramPoint,
    QuantilesPoint,
    ScalarPoint,
)
from streamscope.analysis.series import collect, whole_run, whole_run_duty
from streamscope.core.errors import ConfigError
from streamscope.core.options import RunOptions
from streamscope.core.tablerows import TableRows
from streamscope.core.topology import ChannelInfo, ProbeInfo, ResourceInfo, StageInfo, Topology
from streamscope.report.data import vq_levels
from streamscope.store import DuckDBStore, InMemoryStore, QueryRecord, Run, RunMeta, load
from streamscope.store import writer as store_writer
from streamscope.store.retention import FACTOR, edges, level_age_ns

F = 20_000_000  # 20 ms frames
TOPOLOGY = Topology(
    "p",
    resources=(ResourceInfo("main", "thread"),),
    stages=(StageInfo("a", "main", "source"), StageInfo("b", "main", "sink")),
    channels=(ChannelInfo("a -> b", "a", "b", 16),),
    probes=(ProbeInfo(0, "tail", "a -> b"), ProbeInfo(1, "head", "a -> b")),
)
QUERIES = (
    QueryRecord(
        0, "occupancy(a -> b)", "occupancy", "items", F, ("a -> b",), ("mean", "max", "histogram")
    ),
    QueryRecord(
        1,
        "throughput(a -> b): mean, count",
        "throughput",
        "items/s",
        F,
        ("a -> b",),
        ("mean", "count"),
    ),
    QueryRecord(2, "latency(a -> b)", "latency", "ns", F, ("a -> b",), ("mean", "quantiles")),
    QueryRecord(3, "state(b)", "state", "", F, ("b",), ("duty",)),
    QueryRecord(
        4,
        "sample(b.x): first, last, min, sum",
        "sample",
        "",
        F,
        ("b.x",),
        ("first", "last", "min", "sum"),
    ),
)
META = RunMeta(run_id="r", name="p", app="p.py", command="streamscope run p.py", argv=(),
               host="h", started_unix_ns=0, frame_ns=F, version="0")  # fmt: skip
EDGES = (0.0, 4.0, 8.0, 16.0)


def _frames(k: int, rng: np.random.Generator) -> list[FrameResult]:
    """Frame ``k`` of every query, with data as a run's would be (some latency frames empty)."""
    covered = F if k else F // 3
    span = (k * F, (k + 1) * F, covered)
    occ = rng.uniform(0, 16, 5)
    lat = None if rng.random() < 0.1 else float(rng.uniform(1e3, 1e6))
    busy = float(rng.uniform(0, 1))
    return [
        FrameResult(0, "a -> b", k, *span, (
            ScalarPoint("mean", float(occ.mean())), ScalarPoint("max", float(occ.max())),
            HistogramPoint(EDGES, tuple(float(x) for x in rng.integers(0, 9, 3)), 1.0, 2.0),
        )),
        FrameResult(1, "a -> b", k, *span, (
            ScalarPoint("mean", float(rng.integers(0, 50)) / (covered / 1e9)),
            ScalarPoint("count", float(rng.integers(0, 50))),
        )),
        FrameResult(2, "a -> b", k, *span, (
            ScalarPoint("mean", lat),
            QuantilesPoint((0.5, 0.99), (lat, None if lat is None else lat * 2)),
        )),
        FrameResult(3, "b", k, *span, (
            DutyPoint(("busy", "idle"), (busy, 1.0 - busy)),
        )),
        FrameResult(4, "b.x", k, *span, (
            ScalarPoint("first", None if k < 3 else float(k)),
            ScalarPoint("last", float(k)), ScalarPoint("min", float(occ.min())),
            ScalarPoint("sum", float(occ.sum())),
        )),
    ]  # fmt: skip


def _stacks(first: int, last: int) -> TableRows:
    """The ``stacks`` rows of frames ``first`` to ``last`` (excluded): stage b's samples, a
    few stacks in two states, as a process's sampler counts them per frame."""
    rows = [(k * F, F, "b", ("running", "waiting")[k % 2], f"main;f{k % 3}", 1 + k % 2)
            for k in range(first, last)]  # fmt: skip
    return TableRows("stacks", {
        "t_ns": [r[0] for r in rows], "frame_ns": [r[1] for r in rows],
        "stage": [r[2] for r in rows], "state": [r[3] for r in rows],
        "stack": [r[4] for r in rows], "samples": [r[5] for r in rows],
        "ns": [r[5] * F // 2 for r in rows],
    })  # fmt: skip


def _levels(first: int, last: int) -> TableRows:
    """A virtual queue's ``vq_level`` rows of frames ``first`` to ``last`` (excluded), on the
    occupancy query's target: two series, their fractions changing from frame to frame, a
    level missing from some frames (never at it)."""
    rows = []
    for k in range(first, last):
        top = 3 if k % 5 else 2  # level 2 absent one frame in five
        raw = [1.0 + (k * (i + 1)) % 7 for i in range(top)]
        rows += [(0, "a -> b", k, s, i, x / sum(raw)) for s in ("predicted", "tail")
                 for i, x in enumerate(raw)]  # fmt: skip
    names = ("query_id", "target", "frame", "series", "level", "fraction")
    return TableRows("vq_level", {c: [r[j] for r in rows] for j, c in enumerate(names)})


def _write(path: Path, n: int, keep_ns: int | None, every: int = 25, fold: int = 0) -> None:
    rng = np.random.default_rng(1)
    store = DuckDBStore(path, keep_ns=keep_ns, checkpoint_every=fold)
    store.begin(META, TOPOLOGY, QUERIES)
    for first in range(0, n, every):
        frames = [r for k in range(first, min(first + every, n)) for r in _frames(k, rng)]
        store.write_table(_stacks(first, min(first + every, n)))
        store.write_table(_levels(first, min(first + every, n)))
        store.write_frames(frames)
        drops = [DropCount(p, k, 0, 3) for k in range(first, min(first + every, n)) for p in (0, 1)]
        store.write_drops(drops)
    store.finish("completed", None, 1, n * F)
    store.close()


def _figures(path: Path) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    with load(path) as run:
        for s in collect(run):
            for stat, values in s.scalars.items():
                out[f"{s.query.id}/{stat}"] = whole_run(values, s.covered, stat)
            for label, v in (whole_run_duty(s) or {}).items():
                out[f"{s.query.id}/duty.{label}"] = v
            hist = [h for h in s.hists if h is not None]
            if hist:
                out[f"{s.query.id}/hist"] = sum(h.total for h in hist)
        rows = run.sql("SELECT sum(dropped), sum(recorded) FROM drops")[1]
        out["recorded"] = float(rows[0][1])
        for state, stack, samples, ns in run.sql(
            "SELECT state, stack, sum(samples), sum(ns) FROM stacks GROUP BY ALL"
        )[1]:
            out[f"stacks/{state}/{stack}"] = float(samples)
            out[f"stacks/{state}/{stack}/ns"] = float(ns)
        for series, levels in vq_levels(run, 0, "a -> b").overall.items():
            out.update((f"vq/{series}/{i}", x) for i, x in enumerate(levels))
    return out


def test_a_rolled_up_run_has_the_same_whole_run_figures_and_few_frames(tmp_path: Path) -> None:
    n = 2000  # 40 s of 20 ms frames
    whole, kept = tmp_path / "whole.duckdb", tmp_path / "kept.duckdb"
    _write(whole, n, None)
    _write(kept, n, 5_000_000_000)
    a, b = _figures(whole), _figures(kept)
    assert a.keys() == b.keys()
    for key, va in a.items():
        vb = b[key]
        assert va is not None and vb is not None, key
        if key.startswith("2/"):
            continue  # latency: frames without items weigh in the mean, see below
        assert math.isclose(va, vb, rel_tol=1e-9), (key, va, vb)
    with load(kept) as run:
        per_target = run.sql("SELECT query_id, count(*) FROM frame GROUP BY 1")[1]
        assert all(count <= 400 for _, count in per_target), per_target
        # throughput: every item of every frame is in the rolled-up frames' rates
        items = run.sql("SELECT sum(s.value * f.covered_ns / 1e9) FROM stat s JOIN frame f "
                        "USING (query_id, target, frame) WHERE s.query_id = 1 "
                        "AND s.stat = 'mean'")[1][0][0]  # fmt: skip
        spans = run.sql("SELECT t_start_ns, t_end_ns FROM frame WHERE query_id = 0 "
                        "ORDER BY frame")[1]  # fmt: skip
    with load(whole) as run:
        items_whole = run.sql("SELECT sum(s.value * f.covered_ns / 1e9) FROM stat s JOIN frame f "
                              "USING (query_id, target, frame) WHERE s.query_id = 1 "
                              "AND s.stat = 'mean'")[1][0][0]  # fmt: skip
    assert math.isclose(items, items_whole, rel_tol=1e-9)
    # the frames tile the run: no gap, no overlap, coarser ones earlier
    assert spans[0][0] == 0 and spans[-1][1] == n * F
    assert all(x[1] == y[0] for x, y in zip(spans, spans[1:], strict=False))
    widths = [e - s for s, e in spans]
    assert widths == sorted(widths, reverse=True) and widths[0] > F and widths[-1] == F
    assert sum(w == F for w in widths) >= 5_000_000_000 // F
    # the sampled stacks are rolled up with the frames: each in the frame its rows fell in
    with load(kept) as run:
        stacks = run.sql("SELECT t_ns, frame_ns, count(*) FROM stacks GROUP BY ALL ORDER BY 1")[1]
    assert [(t, w) for t, w, _ in stacks] == [(s, e - s) for s, e in spans]
    assert all(rows <= 6 for _, _, rows in stacks)  # its 2 states x 3 stacks at most
    # and a virtual queue's level distributions: one per series and frame, summing to 1
    with load(kept) as run:
        levels = run.sql("SELECT frame, series, sum(fraction), count(*) FROM vq_level "
                         "GROUP BY ALL ORDER BY ALL")[1]  # fmt: skip
        frames = run.sql("SELECT frame FROM frame WHERE query_id = 0 ORDER BY frame")[1]
    assert sorted({f for f, *_ in levels}) == [f for (f,) in frames]
    assert all(math.isclose(total, 1.0) and n <= 3 for _, _, total, n in levels)


def test_a_kept_run_opens_its_file_afresh_as_it_rolls_up_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What DuckDB keeps in memory of each roll-up's deletes goes when the file is opened
    again: the store does so every ``REOPEN_ROLLS`` roll-ups, after a write that folded the
    log, and every figure is the same as a run kept whole."""
    monkeypatch.setattr(store_writer, "REOPEN_ROLLS", 2)
    opened: list[int] = []
    reopen = DuckDBStore._reopen

    def counted(self: DuckDBStore) -> None:
        opened.append(id(self))
        reopen(self)

    monkeypatch.setattr(DuckDBStore, "_reopen", counted)
    n = 1000
    whole, kept = tmp_path / "whole.duckdb", tmp_path / "kept.duckdb"
    _write(whole, n, None)
    assert not opened  # no roll-up, no reopening
    _write(kept, n, 2_000_000_000, fold=1)
    assert len(opened) >= 10, opened  # 36 roll-ups, one every 16 frames past the first 2 s
    a, b = _figures(whole), _figures(kept)
    assert a.keys() == b.keys()
    for key, va in a.items():
        if not key.startswith("2/"):
            assert va is not None and math.isclose(va, b[key] or math.nan, rel_tol=1e-9), key


def test_the_latency_mean_of_a_rolled_up_run_weighs_frames_with_items() -> None:
    # a frame without items has no latency: it weighs nothing in its rolled-up frame (the
    # whole-run mean over rolled-up frames weighs each by all the time it covers, so the two
    # differ only where some of a rolled-up frame's frames had no item)
    values = np.array([1.0, np.nan, 3.0])
    covered = np.array([1.0, 1.0, 1.0])
    assert whole_run(values, covered, "mean") == 2.0


@settings(max_examples=200, deadline=None)
@given(
    keep_frames=st.integers(4, 400),
    frame_ms=st.sampled_from([1, 10, 20, 1000]),
    now_frames=st.integers(0, 10**7),
)
def test_the_levels_are_aligned_and_ordered(keep_frames: int, frame_ms: int,
                                            now_frames: int) -> None:  # fmt: skip
    f = frame_ms * 1_000_000
    keep = keep_frames * f
    now = now_frames * f
    ends = edges(keep, f, now)
    for level, end in enumerate(ends):
        assert end % (f * FACTOR ** (level + 1)) == 0
        assert end <= now - level_age_ns(keep, level)
        if level:
            assert end <= ends[level - 1]
    assert len(ends) <= 12


def test_a_keep_shorter_than_four_frames_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"at least 0\.08 s"):
        RunOptions(frame_ns=F, keep_ns=3 * F)
    assert RunOptions(frame_ns=F, keep_ns=4 * F).keep_ns == 4 * F


def test_a_run_held_in_memory_is_rolled_up_as_its_file_is(tmp_path: Path) -> None:
    """The live page's run (row lists) keeps the same frames as the run file of ``--keep``."""
    n, keep = 1200, 3_000_000_000
    path = tmp_path / "kept.duckdb"
    _write(path, n, keep)
    rng = np.random.default_rng(1)
    mem = InMemoryStore(keep)
    mem.begin(META, TOPOLOGY, QUERIES)
    for first in range(0, n, 25):
        mem.write_frames([r for k in range(first, min(first + 25, n)) for r in _frames(k, rng)])
        mem.write_drops([DropCount(p, k, 0, 3) for k in range(first, min(first + 25, n))
                         for p in (0, 1)])  # fmt: skip
        mem.write_table(_stacks(first, min(first + 25, n)))
        mem.write_table(_levels(first, min(first + 25, n)))
    mem.finish("completed", None, 1, n * F)
    sql = "SELECT query_id, frame, t_start_ns, t_end_ns, covered_ns FROM frame ORDER BY ALL"
    with load(path) as on_disk:
        want = on_disk.sql(sql)[1]
        want_drops = on_disk.sql("SELECT * FROM drops ORDER BY ALL")[1]
        want_stacks = on_disk.sql("SELECT * FROM stacks ORDER BY ALL")[1]
        levels = "SELECT * EXCLUDE (fraction), round(fraction, 12) FROM vq_level ORDER BY ALL"
        want_levels = on_disk.sql(levels)[1]  # (sums in another order: the last bits differ)
    with Run.from_memory(mem) as held:
        assert held.sql(sql)[1] == want
        assert held.sql("SELECT * FROM drops ORDER BY ALL")[1] == want_drops
        assert held.sql("SELECT * FROM stacks ORDER BY ALL")[1] == want_stacks
        assert held.sql(levels)[1] == want_levels
        assert held.rolled_up() and len(want) < 4 * n // 2
    assert len(want_stacks) < n // 2
