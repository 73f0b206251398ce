"""Drop-in instrumentation: an existing threads-and-queues program, changed in a few lines."""

from __future__ import annotations

import queue
import threading
import time

import pytest

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.pipeline.dropin import REGISTRY


@pytest.fixture(autouse=True)
def fresh_registry() -> None:
    REGISTRY.stages.clear()
    REGISTRY.queues.clear()


def test_queue_is_a_queue() -> None:
    q = ss.Queue(2, src="p", dst="c")
    assert isinstance(q, queue.Queue)
    q.put(1)
    q.put_nowait(2)
    with pytest.raises(queue.Full):
        q.put_nowait(3)
    assert [q.get(), q.get_nowait()] == [1, 2]
    with pytest.raises(queue.Empty):
        q.get(timeout=0.01)


def test_program_with_threads_gets_occupancy_states_and_throughput() -> None:
    q = ss.Queue(4, src="producer", dst="consumer")
    n = 300

    def producer() -> None:
        with ss.stage("producer"):
            for i in range(n):
                q.put(i)
            q.put(None)

    @ss.stage("consumer")
    def consumer() -> None:
        while q.get() is not None:
            time.sleep(0.0005)

    queries = [
        "occupancy(producer -> consumer): mean, max every 100ms",
        "state(consumer): duty every 100ms",
        "state(producer): duty every 100ms",
        "count(producer -> consumer): sum every 100ms",
    ]
    with ss.monitor(queries, ss.RunOptions(mode="inline", frame_ns=100_000_000)) as m:
        threads = [threading.Thread(target=producer), threading.Thread(target=consumer)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert m.result is not None
    assert m.result.status == "completed"
    run = ss.Run.from_memory(m.result.store)  # type: ignore[arg-type]
    counted = sum(
        p.value or 0 for r in run.results(3) for p in r.points if isinstance(p, ScalarPoint)
    )
    assert counted == n + 1  # the None that ends the program is an item too
    full = [r.point("max") for r in run.results(0)]
    assert max(p.value or 0 for p in full if isinstance(p, ScalarPoint)) == 4
    # The slow consumer is busy; the fast producer mostly waits on the full queue.
    cons = [r.point("duty") for r in run.results(1)][1]
    prod = [r.point("duty") for r in run.results(2)][1]
    assert isinstance(cons, DutyPoint)
    assert isinstance(prod, DutyPoint)
    assert dict(zip(cons.labels, cons.fractions, strict=True))["busy"] > 0.9
    assert dict(zip(prod.labels, prod.fractions, strict=True))["blocked_out"] > 0.9


def test_unknown_names_are_refused_before_the_program_runs() -> None:
    ss.Queue(4, src="a", dst="b")
    with pytest.raises(ss.QueryError, match="unknown stage 'x'"), ss.monitor(["state(x): duty"]):
        pytest.fail("the block must not run")


def test_an_exception_in_the_program_marks_the_run_failed() -> None:
    q = ss.Queue(4, src="a", dst="b")
    with pytest.raises(RuntimeError), ss.monitor(["count(a -> b): sum"]) as m:
        q.put(1)
        raise RuntimeError("program broke")
    assert m.result is not None
    assert m.result.status == "failed"
    assert "program broke" in (m.result.error or "")
    assert q.tail is None  # probes are off again after the session
