"""Stages on an asyncio event loop (``resource=ss.Asyncio(...)``), held to their own stamps.

Each coroutine stamps the time it spends on its items (its awaited work); the monitor's state
of each task, the channels' counts and the findings must agree with those stamps and with
queueing theory (Little's law), and a task that raises fails the run naming it.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.analysis import findings

ITEMS = 500


def _busy(run: ss.Run, stage: str) -> float:
    (q,) = [q for q in run.queries if q.text.startswith("state(")]
    shares = []
    for f in run.results(q.id, stage)[1:-1]:
        d = f.point("duty")
        assert isinstance(d, DutyPoint)
        shares.append(dict(zip(d.labels, d.fractions, strict=True))["busy"])
    assert shares, f"{stage}: too few frames"
    return sum(shares) / len(shares)


def test_tasks_on_a_loop_are_stages_that_tell_the_truth(tmp_path: Path) -> None:
    worked = {"fast": 0.0, "slow": 0.0}
    span: dict[str, list[float]] = {"fast": [], "slow": []}

    def timed(name: str, seconds: float):  # type: ignore[no-untyped-def]
        async def work(x: int) -> int:
            t = time.perf_counter()
            span[name].append(t)
            await asyncio.sleep(seconds)
            worked[name] += time.perf_counter() - t
            span[name].append(time.perf_counter())
            return x

        work.__name__ = name
        return work

    async def source():  # type: ignore[no-untyped-def]
        for i in range(ITEMS):
            yield i

    io = ss.Asyncio("io")
    p = ss.Pipeline("aio")
    p.add("src", source, resource=io)
    p.add("fast", timed("fast", 0.002), resource=io)
    p.add("slow", timed("slow", 0.004), resource=io)
    p.add("sink", lambda x: None)  # a thread stage, fed from the loop
    p.chain("src", "fast", "slow", "sink", capacity=8)
    out = tmp_path / "aio.duckdb"
    res = ss.run(p, [], ss.RunOptions(out=out, mode="inline", frame_ns=200_000_000))
    assert res.status == "completed", res.error
    share = {k: worked[k] / (span[k][-1] - span[k][0]) for k in worked}
    assert share["slow"] >= 0.9  # its own stamps: always at work
    with ss.load(out) as run:
        kinds = {r.name: r.kind for r in run.topology.resources}
        where = {s.name: s.resource for s in run.topology.stages}
        assert kinds[where["slow"]] == "asyncio" and where["src"] == where["fast"] == "io"
        assert _busy(run, "slow") >= 0.9
        assert abs(_busy(run, "fast") - share["fast"]) <= 0.1
        (q,) = [q for q in run.queries if q.text.startswith("throughput(")]
        counted = sum(
            (pt.value or 0.0) * f.covered_ns / 1e9
            for f in run.results(q.id, "fast -> slow") for pt in f.points
            if isinstance(pt, ScalarPoint) and pt.stat == "mean"
        )  # fmt: skip
        assert counted == pytest.approx(ITEMS, abs=0.5)
        found = findings(run)
        (neck,) = [f for f in found if f.kind == "bottleneck"]
        assert neck.target == "slow", neck.title
        little = [f for f in found if f.kind == "littles_law" and f.target == "fast -> slow"]
        assert little and "holds" in little[0].title


def test_a_task_that_raises_fails_the_run_and_names_its_stage(tmp_path: Path) -> None:
    async def breaks(x: int) -> int:
        await asyncio.sleep(0)
        if x == 30:
            raise ValueError("item 30 is bad")
        return x

    p = ss.Pipeline("aio-fail")
    p.add("src", range(100))
    p.add("work", breaks, resource="asyncio")
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink", capacity=4)
    res = ss.run(p, [], ss.RunOptions(out=tmp_path / "f.duckdb", mode="inline"))
    assert res.status == "failed"
    assert "'work'" in (res.error or "") and "item 30 is bad" in (res.error or "")


def test_the_loops_lag_is_measured_by_default(tmp_path: Path) -> None:
    """A task that blocks its loop for 30 ms every 20th item (the stage's own truth): the
    loop's lag, measured by default from its first stage, reaches most of a block and never
    more than the loop was held up as the program's own tasks saw it: the longest it went
    without running either of them, from a call's start or a resumption to the next (a
    block, and whatever a busy machine added to it; the resumptions alone missed the first
    block, before anything had resumed, which a hog once stretched to 64 ms)."""
    resumed: list[int] = []

    async def careless(x: int) -> int:
        resumed.append(time.monotonic_ns())
        if x % 20 == 0:
            time.sleep(0.03)  # blocks the loop, as a blocking call in a coroutine would
        await asyncio.sleep(0.003)
        resumed.append(time.monotonic_ns())
        return x

    async def other(x: int) -> int:
        resumed.append(time.monotonic_ns())
        await asyncio.sleep(0.001)
        resumed.append(time.monotonic_ns())
        return x

    p = ss.Pipeline("aio-lag")
    p.add("src", range(600))
    p.add("careless", careless, resource="asyncio")
    p.add("other", other, resource="asyncio")
    p.add("sink", lambda x: None)
    p.chain("src", "careless", "other", "sink", capacity=8)
    out = tmp_path / "lag.duckdb"
    res = ss.run(p, [], ss.RunOptions(out=out, mode="inline"))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        (q,) = [q for q in run.queries if q.text.startswith("timer(*.loop_lag)")]
        assert q.targets == ("careless.loop_lag",)
        maxima = [
            float(pt.value) for f in run.results(q.id, "careless.loop_lag") for pt in f.points
            if isinstance(pt, ScalarPoint) and pt.stat == "max" and pt.value is not None
        ]  # fmt: skip
    held = float(np.diff(np.sort(np.array(resumed))).max())
    print(f"lag at most {max(maxima) / 1e6:.1f} ms; the tasks waited up to {held / 1e6:.1f} ms")
    # (a lag sample is read a loop iteration after it was due: 1 ms of slack)
    assert maxima and 15e6 <= max(maxima) <= held + 1e6, (maxima, held)
