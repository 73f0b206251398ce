"""``pipeline.run.worker.runq_ns``: a thread's time runnable but waiting for a core, what the
what-if model takes out of a stage's wall time. The truth: two processes that compute on one
core for the same wall time each wait about half of it; a thread that sleeps waits for none."""

from __future__ import annotations

import multiprocessing as mp
import os
import time
from typing import Any

import pytest

from streamscope.pipeline.run.worker import runq_ns

pytestmark = pytest.mark.skipif(runq_ns() < 0, reason="the OS does not count run-queue time")

SPIN_S = 0.4


def _spin(cpu: int, start: Any, out: mp.SimpleQueue) -> None:  # type: ignore[type-arg]
    os.sched_setaffinity(0, {cpu})
    start.wait()
    q0, c0, t0 = runq_ns(), time.thread_time_ns(), time.monotonic()
    while time.monotonic() - t0 < SPIN_S:
        pass
    out.put((runq_ns() - q0, time.thread_time_ns() - c0))


def test_two_computing_on_one_core_each_wait_about_half() -> None:
    cpu = min(os.sched_getaffinity(0))
    ctx = mp.get_context("spawn")
    out, start = ctx.SimpleQueue(), ctx.Barrier(2)
    procs = [ctx.Process(target=_spin, args=(cpu, start, out)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    got = [out.get() for _ in procs]
    for waited, cpu_ns in got:
        # Both spin SPIN_S of wall on one core: the CPU time they got and the time they waited
        # for it add up to about that, and each waited a good share of it (anything else on
        # the core only adds to the wait).
        assert waited + cpu_ns == pytest.approx(SPIN_S * 1e9, rel=0.15)
        assert waited >= 0.2 * SPIN_S * 1e9


def test_a_sleeping_thread_waits_for_no_core() -> None:
    q0 = runq_ns()
    time.sleep(0.3)
    assert 0 <= runq_ns() - q0 < 0.1e9
