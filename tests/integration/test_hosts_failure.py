"""A host lost mid-run, on a cluster streamscope starts itself: the run ends as failed, naming
the host and its stages, with every frame recorded so far kept and no process of the cluster
left behind."""

from __future__ import annotations

from pathlib import Path

import streamscope as ss
from oracles import example, ray_processes_left


def test_a_host_that_dies_mid_run_fails_the_run_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    """node-b's manager is killed at item 600, 3 s into the run (by its own worker, as a
    machine that dies), once its clock has been calibrated (a host lost before its first
    burst leaves records no one can place in time): the cluster finds it dead within a few
    seconds; the run stops then."""
    mod = example("hosts")
    out = tmp_path / "killed.duckdb"
    p = mod.pipeline(["--items", "4000", "--kill-at", "600"])
    res = ss.run(p, mod.QUERIES, ss.RunOptions(out=out, frame_ns=500_000_000))
    assert res.status == "failed"
    assert res.error is not None and "host 'node-b'" in res.error, res.error
    assert "work0, work1" in res.error and "lost" in res.error
    assert ray_processes_left() == []
    with ss.load(out) as run:
        assert run.status == "failed" and run.error == res.error
        qid = next(q.id for q in run.queries if q.metric == "throughput")
        through = sum(
            p.value * 0.5
            for fr in run.results(qid)
            for p in fr.points
            if getattr(p, "stat", "") == "mean" and fr.target.startswith("source ->")
        )
        # The frames before the loss are kept: at least the items before the kill went
        # through, and not all of them (the source had 4000 to make, 20 s of them).
        assert 600 <= through < 4000, through
