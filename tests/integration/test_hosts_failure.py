"""A host lost mid-run, on a cluster streamscope starts itself: the run ends as failed, naming
the host (by its node's own id) and its stages, with every frame recorded so far kept and no
process of the cluster left behind."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

import streamscope as ss
from oracles import example, ray_processes_left
from watched import Watched


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


APP = Path(__file__).parent / "apps" / "hosts_program.py"
HOSTS = ("node-a", "node-b", "node-c")
#: How long a test waits for the cluster to start and items to flow (a cap against hangs).
START_CAP_S = 120.0


def _raylets(w: Watched) -> dict[str, tuple[psutil.Process, str]]:
    """Host -> (its node's raylet, the node's id), from the raylets' command lines."""
    out = {}
    for p in psutil.Process(w.proc.pid).children(recursive=True):
        with contextlib.suppress(psutil.Error):
            args = p.cmdline()
            if not args or not args[0].endswith("/raylet"):
                continue
            opts = dict(a[2:].split("=", 1) for a in args[1:] if a.startswith("--") and "=" in a)
            host = opts["static_resource_list"].split(",")[0]
            out[host] = (p, opts["node_id"])
    return out


def _wait_for(path: Path, w: Watched) -> None:
    deadline = time.monotonic() + START_CAP_S
    while not path.exists():
        assert w.proc.poll() is None, w.proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, f"{path.name} never came"
        time.sleep(0.02)


@pytest.mark.parametrize(
    ("killed", "when"),
    [("node-a", "after its stages ended")],
    ids=["head-after-its-stages"],  # where another host was named every time
)
def test_a_lost_node_is_named_by_its_own_id(
    start: Callable[..., Watched], tmp_path: Path, killed: str, when: str
) -> None:
    """A node's raylet killed (the head's, which this process's connection goes through: every
    actor it owns dies with it, on every host, in an order no one fixes): the run fails naming
    that host and that node's own id, and no other host. After its stages ended, the head's
    loss shows only as the other hosts' ends (which named the first of them: node-b)."""
    out, marker = tmp_path / "run.duckdb", tmp_path / "flowing"
    ended = when == "after its stages ended"
    app = ["--items", "30", "--gap-ms", "1", "--work-ms", "200", "--capacity", "64"] if ended \
        else ["--items", "0"]  # fmt: skip
    w = start(str(APP), "--out", str(out), "--quiet", "--frame", "200ms",
              "--", *app, "--marker", str(marker))  # fmt: skip
    _wait_for(marker.with_name(marker.name + ".done") if ended else marker, w)
    time.sleep(2.0)  # bursts placed the hosts' clocks; node-a's run ended and was taken
    nodes = _raylets(w)
    assert sorted(nodes) == list(HOSTS)
    raylet, node_id = nodes[killed]
    raylet.kill()
    _, err = w.proc.communicate(timeout=120)
    said = err.strip().splitlines()[-1]
    print(f"{killed} (node {node_id[:12]}) killed {when}: {said}")
    assert w.proc.returncode == 1, err[-3000:]
    assert f"host {killed!r} (node {node_id[:12]}) was lost" in said, said
    for other in set(HOSTS) - {killed}:
        assert f"host {other!r}" not in said and nodes[other][1][:12] not in said, said
    with ss.load(out) as run:
        assert run.status == "failed" and run.error is not None
        assert f"host {killed!r} (node {node_id[:12]}) was lost" in run.error
    assert w.alive_after(10.0) == []
