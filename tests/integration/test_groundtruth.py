"""Ground truth from the application itself (the method of Lancaster et al. 2011): examples/mm1.py records the
true insertion and removal time of every item; a trace-driven replay of those times gives the true
time-weighted occupancy of ``source -> server``, which the monitored histogram must reproduce.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from oracles import example, occupancy_ns, w1
from streamscope.runtime import RunOptions, run
from streamscope.store.reader import Run, load
from streamscope.store.writer import InMemoryStore

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EDGE = "source -> server"
CAPACITY = 256
FRAME_NS = 500_000_000
#: W1 between the monitored and the true occupancy distribution, in items.
W1_LIMIT = 0.05

F64 = NDArray[np.float64]
I64 = NDArray[np.int64]


def replay(inserted: I64, removed: I64) -> tuple[F64, int, int]:
    """Time-weighted occupancy from the true event times: (ns at each level from ``lo``, lo, span).

    Events are replayed in time order, an insertion before a removal at the same nanosecond (as
    the monitor orders them). The truth takes each time after the channel operation returned, in
    the stage's own thread, so an item can be "removed" a few µs before it was "inserted"; the
    replay keeps the brief negative level that gives rather than hide it.
    """
    t = np.concatenate((inserted, removed))
    step = np.concatenate((np.ones(len(inserted), np.int64), -np.ones(len(removed), np.int64)))
    order = np.lexsort((-step, t))
    t, step = t[order], step[order]
    level = np.cumsum(step)[:-1]
    dur = np.diff(t).astype(np.float64)
    lo = min(int(level.min()), 0)
    return np.bincount(level - lo, weights=dur), lo, int(t[-1] - t[0])


def check_against_truth(r: Run, truth: Path, label: str) -> None:
    inserted = np.load(truth / "inserted.npy")
    removed = np.load(truth / "removed.npy")
    assert len(inserted) == len(removed), f"{len(inserted)} inserted, {len(removed)} removed"
    true_ns, lo, span = replay(inserted, removed)
    mon_ns, covered = occupancy_ns(r, 0, EDGE, CAPACITY)
    # The Run does not expose the run's start in host monotonic ticks (only started_unix_ns, a
    # wall-clock reading), so the truth cannot be cut at the monitor's frame boundaries. It does
    # not need to be for the whole-run distribution: before the first insertion and after the
    # last removal the channel is empty in both views, so the time at every level >= 1 does not
    # depend on the window. The comparison is over the monitored window [0, end): the truth is
    # credited at level 0 with the monitored time outside its own [first insertion, last
    # removal] span (start-up and shut-down of the pipeline).
    total = float(mon_ns.sum())
    pad = total - span
    assert pad >= 0, (
        f"{label}: the monitored window ({total:.0f} ns) is shorter than the truth span ({span} ns)"
    )
    hi = max(len(true_ns) + lo, CAPACITY + 1)
    true_full = np.zeros(hi - lo)
    true_full[: len(true_ns)] = true_ns
    true_full[-lo] += pad
    mon_full = np.zeros(hi - lo)
    mon_full[-lo : -lo + CAPACITY + 1] = mon_ns
    p_true, p_mon = true_full / total, mon_full / total
    levels = np.arange(lo, hi)
    dist = w1(p_true, p_mon)
    tv = 0.5 * float(np.abs(p_true - p_mon).sum())
    mean_true, mean_mon = float(levels @ p_true), float(levels @ p_mon)
    busy_true, busy_mon = float(true_full[-lo + 1 :].sum()), float(mon_ns[1:].sum())
    figures = (
        f"{label}: W1={dist:.4f} items (limit {W1_LIMIT}), TV={tv:.4f}, mean occupancy "
        f"monitored={mean_mon:.4f} true={mean_true:.4f}, time at level>=1 monitored="
        f"{busy_mon / 1e9:.4f}s true={busy_true / 1e9:.4f}s, window={total / 1e9:.3f}s "
        f"(truth span {span / 1e9:.3f}s, covered {covered / 1e9:.3f}s), {len(inserted)} items"
    )
    print(figures)
    assert dist < W1_LIMIT, figures


def argv(truth: Path, resource: str) -> list[str]:
    return [
        "--rho", "0.8",
        "--items", "3000",
        "--capacity", str(CAPACITY),
        "--seed", "11",
        "--service-ms", "1",
        "--source-resource", resource,
        "--server-resource", resource,
        "--truth", str(truth),
    ]  # fmt: skip


QUERIES = [f"occupancy({EDGE}): mean, histogram every 500ms"]


@pytest.mark.slow
def test_thread_stages_match_the_truth(tmp_path: Path) -> None:
    truth = tmp_path / "truth"
    res = run(
        example("mm1").build(argv(truth, "thread")),
        QUERIES,
        RunOptions(frame_ns=FRAME_NS, mode="inline"),
    )
    assert res.status == "completed", res.error
    assert isinstance(res.store, InMemoryStore)
    check_against_truth(Run.from_memory(res.store), truth, "threads, inline monitor")


@pytest.mark.slow
def test_process_stages_match_the_truth(tmp_path: Path) -> None:
    truth = tmp_path / "truth"
    out = tmp_path / "r.duckdb"
    res = run(
        example("mm1").build(argv(truth, "process")),
        QUERIES,
        RunOptions(frame_ns=FRAME_NS, mode="process", out=out),
    )
    assert res.status == "completed", res.error
    with load(out) as r:
        check_against_truth(r, truth, "processes, monitor process")
