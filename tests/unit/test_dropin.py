"""Drop-in instrumentation: an existing threads-and-queues program, changed in a few lines."""

from __future__ import annotations

import queue
import threading
import time

import pytest

import streamscope as ss
from streamscope.aggregate.points import DutyPoint, ScalarPoint
from streamscope.pipeline.program.dropin import REGISTRY


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


def test_a_malformed_query_is_refused_before_the_program_runs() -> None:
    ss.Queue(4, src="a", dst="b")
    with pytest.raises(ss.QueryError, match="query 1:1:8"), ss.monitor(["state(x: duty"]):
        pytest.fail("the block must not run")


def test_a_query_on_a_name_never_seen_warns_and_matches_no_phantom() -> None:
    """Names a program's queues give their ends are no stages until a thread works in one:
    a wildcard matches only the workers that ran, and a name that never ran warns."""
    q = ss.Queue(8, src="reader", dst="parser")

    def work(i: int) -> None:
        with ss.stage(f"parser{i}"):
            while q.get() is not None:
                pass

    queries = ["state(parser*): duty", "state(parser): duty", "state(nobody): duty"]

    def program() -> None:
        pool = [threading.Thread(target=work, args=(i,)) for i in range(2)]
        for t in pool:
            t.start()
        for k in [*range(50), None, None]:
            q.put(k)
        for t in pool:
            t.join()

    with pytest.warns(ss.StreamscopeWarning) as caught, ss.monitor(queries) as m:
        program()
    assert m.result is not None and m.result.status == "completed"
    said = [str(w.message) for w in caught]
    assert any("'state(parser): duty'" in w and "parser0" in w for w in said)
    assert any("'state(nobody): duty'" in w for w in said)
    assert not any("parser*" in w for w in said)
    run = ss.Run.from_memory(m.result.store)  # type: ignore[arg-type]
    assert sorted({f.target for f in run.results(0)}) == ["parser0", "parser1"]
    assert not run.results(1) and not run.results(2)


def test_queues_and_stages_made_after_monitoring_starts_are_measured() -> None:
    queries = ["count(late_src -> late_dst): sum every 100ms", "state(late_*): duty every 100ms"]
    with ss.monitor(queries, ss.RunOptions(mode="inline", frame_ns=100_000_000)) as m:
        q = ss.Queue(4, src="late_src", dst="late_dst")

        def consume() -> None:
            with ss.stage("late_dst"):
                while q.get() is not None:
                    time.sleep(0.0002)

        t = threading.Thread(target=consume)
        t.start()
        with ss.stage("late_src"):
            for k in range(200):
                q.put(k)
            q.put(None)
        t.join()
    assert m.result is not None and m.result.status == "completed"
    run = ss.Run.from_memory(m.result.store)  # type: ignore[arg-type]
    counted = sum(
        p.value or 0 for r in run.results(0) for p in r.points if isinstance(p, ScalarPoint)
    )
    assert counted == 201
    assert {f.target for f in run.results(1)} == {"late_src", "late_dst"}
    assert {s.name for s in run.topology.stages} == {"late_src", "late_dst"}


def test_mistakes_are_streamscope_errors() -> None:
    with pytest.raises(ss.ConfigError, match="stage needs a name"):
        ss.stage("")
    with pytest.raises(ss.ConfigError, match="maxsize"):
        ss.MPQueue(-1, src="a", dst="b")
    ss.Queue(1, src="a", dst="b")
    with pytest.raises(ss.PipelineError, match="exists already"):
        ss.Queue(1, src="a", dst="b")


def test_an_exception_in_the_program_marks_the_run_failed() -> None:
    q = ss.Queue(4, src="a", dst="b")
    with pytest.raises(RuntimeError), ss.monitor(["count(a -> b): sum"]) as m:
        q.put(1)
        raise RuntimeError("program broke")
    assert m.result is not None
    assert m.result.status == "failed"
    assert "program broke" in (m.result.error or "")
    assert q.tail is None  # probes are off again after the session
