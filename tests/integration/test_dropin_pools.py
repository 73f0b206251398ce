"""Pools of workers instrumented through the drop-in API tell the truth across processes.

``examples/dropin_pool.py`` runs as a real program (a subprocess): a reader thread, a pool of
workers (forked processes, spawned processes, or threads) each naming its own stage, a writer.
The program stamps every item's work and every call that took an item; those stamps are the
truth the monitor's figures are held against, frame by frame.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.analysis import findings

EXAMPLE = Path(__file__).parents[2] / "examples" / "dropin_pool.py"
WORKERS, ITEMS, CAPACITY = 4, 300, 32
#: Long items: a worker's calls that take and pass on items are then a small part of its time,
#: so its own stamps can show it saturated even on a machine busy with other work.
WORK_MS = 10.0


def overlap(spans: list[list[int]], lo: int, hi: int) -> float:
    """Fraction of [lo, hi) covered by the (disjoint) spans."""
    if not spans:
        return 0.0
    a = np.array(spans, dtype=np.int64)
    return float(np.clip(np.minimum(a[:, 1], hi) - np.maximum(a[:, 0], lo), 0, None).sum()) / (
        hi - lo
    )


@pytest.fixture(scope="module", params=["fork", "spawn", "threads"])
def pool_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    tmp = tmp_path_factory.mktemp(f"pool-{request.param}")
    out, truth = tmp / "pool.duckdb", tmp / "truth.json"
    # A thread pool that computes in Python shares one interpreter lock: its workers wait for
    # the lock inside every call, so the program's stamps can never show one saturated. Its
    # workers wait on I/O instead, as thread pools mostly do.
    mode = ["--threads", "--io"] if request.param == "threads" else ["--start", request.param]
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out), "--truth", str(truth),
         "--workers", str(WORKERS), "--items", str(ITEMS), "--capacity", str(CAPACITY),
         "--work-ms", str(WORK_MS), *mode],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    with ss.load(out) as run:
        yield request.param, run, json.loads(truth.read_text())


def test_each_worker_is_a_stage_on_its_own_resource(pool_run) -> None:  # type: ignore[no-untyped-def]
    mode, run, _ = pool_run
    stages = {s.name: s for s in run.topology.stages}
    workers = [f"parser{i}" for i in range(WORKERS)]
    assert set(workers) <= set(stages)
    assert "parser" not in stages  # the queues' name for the group is no stage of its own
    kinds = {r.name: r.kind for r in run.topology.resources}
    for w in workers:
        res = stages[w].resource
        if mode == "threads":
            assert res == "main" and kinds[res] == "thread"
        else:
            assert kinds[res] == "process" and res != "main"
    assert len({stages[w].resource for w in workers}) == (1 if mode == "threads" else WORKERS)
    (q,) = [q for q in run.queries if q.text.startswith("state(parser*)")]
    assert sorted(q.targets) == workers


def test_occupancy_stays_within_capacity_and_counts_are_exact(pool_run) -> None:  # type: ignore[no-untyped-def]
    _, run, _ = pool_run
    maxima = [
        p.value for f in run.results(0, "reader -> parser") for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == "max" and p.value is not None
    ]  # fmt: skip
    assert maxima and max(maxima) <= CAPACITY
    assert max(maxima) >= CAPACITY - 1  # the pool is the bottleneck: the queue fills
    counted = sum(
        p.value or 0.0 for f in run.results(4, "reader -> parser") for p in f.points
        if isinstance(p, ScalarPoint) and p.stat == "sum"
    )  # fmt: skip
    assert counted == ITEMS + WORKERS  # every item, and each worker's end marker


def test_worker_states_agree_with_the_programs_own_stamps(pool_run) -> None:  # type: ignore[no-untyped-def]
    """In every frame a worker spent wholly inside its stage: the monitor's busy fraction is at
    least the time the program stamped as work, its blocked fractions at most the time the
    program spent in calls that took (or passed on) an item, and its busy fraction at least the
    rest; where those calls took almost no time (items were waiting and room was free: the
    worker was saturated), the worker reads busy >= 0.9."""
    _, run, truth = pool_run
    t0 = run.meta.t0_host_ns
    checked = 0
    for name, st in truth.items():
        work = [[a - t0, b - t0] for a, b in st["work"]]
        took = [[a - t0, b - t0] for a, b in st["get"]]
        gave = [[a - t0, b - t0] for a, b in st["put"]]
        lo_ns, hi_ns = st["start_ns"] - t0, st["end_ns"] - t0
        for f in run.results(1, name):
            if f.t_start_ns < lo_ns or f.t_end_ns > hi_ns:
                continue  # the worker was not in its stage the whole frame
            duty = f.point("duty")
            assert isinstance(duty, DutyPoint)
            got = dict(zip(duty.labels, duty.fractions, strict=True))
            w = overlap(work, f.t_start_ns, f.t_end_ns)
            g = overlap(took, f.t_start_ns, f.t_end_ns)
            p = overlap(gave, f.t_start_ns, f.t_end_ns)
            assert got["busy"] >= w - 0.02, (name, f.frame, got, w)
            assert got["blocked_in"] <= g + 0.02, (name, f.frame, got, g)
            assert got["blocked_out"] <= p + 0.02, (name, f.frame, got, p)
            # Inside its stage a worker is busy whenever it is not waiting in those calls.
            assert got["busy"] >= 1 - g - p - 0.04, (name, f.frame, got, g, p)
            checked += 1
            if g + p <= 0.05:
                assert got["busy"] >= 0.9, (name, f.frame, got, w, g, p)
    # Whether any frame is saturated by the program's own measure depends on the machine (on a
    # busy one the workers wait for the queue's lock, held by a worker that was descheduled):
    # the bounds above hold in every frame either way.
    assert checked >= WORKERS, "no frame lay wholly inside the workers' stages"


def test_the_pool_is_named_the_bottleneck_as_one_group(pool_run) -> None:  # type: ignore[no-untyped-def]
    """The queue in front of the workers is full and they are busy: the finding names the
    group of workers, not one of them, and not 'no bottleneck'."""
    mode, run, _ = pool_run
    found = findings(run)
    kinds = [f.kind for f in found]
    assert "no_bottleneck" not in kinds
    (neck,) = [f for f in found if f.kind == "bottleneck"]
    workers = [f"parser{i}" for i in range(WORKERS)]
    assert neck.target == f"parser0\u2013parser{WORKERS - 1}", (mode, neck.title)
    assert sorted(neck.evidence["members"]) == workers
    assert "add replicas" in neck.suggestion
