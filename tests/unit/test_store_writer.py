"""The monitor's store writer: writes that pile up while one is made go as one, in order, and
what shows them runs once they are in the store; a failure stops the writes but not ``finish``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest

from streamscope.aggregate.points import DropCount, FrameResult, ScalarPoint
from streamscope.core.tablerows import Column, TableRows
from streamscope.core.topology import ChannelInfo, ResourceInfo, StageInfo, Topology
from streamscope.monitor import writer as writer_module
from streamscope.monitor.writer import StoreWriter
from streamscope.store import InMemoryStore, QueryRecord, RunMeta, _rows

F = 10_000_000
TOPOLOGY = Topology(
    "p",
    resources=(ResourceInfo("main", "thread"),),
    stages=(StageInfo("a", "main", "source"), StageInfo("b", "main", "sink")),
    channels=(ChannelInfo("a -> b", "a", "b", 16),),
)
QUERIES = (
    QueryRecord(0, "throughput(a -> b)", "throughput", "items/s", F, ("a -> b",), ("mean",)),
)
META = RunMeta(run_id="r", name="p", app="p.py", command="c", argv=(), host="h",
               started_unix_ns=0, frame_ns=F, version="0")  # fmt: skip


class SlowStore(InMemoryStore):
    """An in-memory run whose writes take a while (as a file's do), each batch recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []  # frames in each write
        self.gate = threading.Event()

    def _do_batch(
        self,
        rows: _rows.Rows | None,
        drops: Sequence[DropCount],
        tables: Sequence[tuple[str, list[Column]]],
    ) -> None:
        self.gate.wait(5)
        self.batches.append(len(rows.frame[0]) if rows is not None else 0)
        super()._do_batch(rows, drops, tables)


def frame(k: int) -> FrameResult:
    return FrameResult(0, "a -> b", k, k * F, (k + 1) * F, F, (ScalarPoint("mean", float(k)),))


def test_writes_that_piled_up_go_at_once_in_order_and_are_shown_after() -> None:
    store = SlowStore()
    writer = StoreWriter(store)
    writer.begin(META, TOPOLOGY, QUERIES)
    shown: list[int] = []
    for k in range(60):
        writer.write_frames([frame(k)])
        writer.write_drops([DropCount(0, k, 0, 1)])
        writer.write_table(TableRows("monitor", {"frame": [k], "lag_ns": [1], "records": [1],
                                                 "cpu_ns": [1], "drains": [1]}))  # fmt: skip
        # what it shows is in the store by then: every frame up to k
        writer.after_writes(lambda k=k: shown.append(len(store.frames) - k - 1))
    store.gate.set()
    writer.finish("completed", None, 1, 60 * F)
    writer.flush()
    writer.close()
    assert writer.error is None
    assert [r[2] for r in store.frames] == list(range(60))  # in order, each once
    assert [d[1] for d in store.drops] == list(range(60))
    assert [r[0] for r in store.tables["monitor"]] == list(range(60))
    assert len(shown) == 60 and min(shown) >= 0  # each shown once its frame was in
    assert sum(store.batches) == 60 and len(store.batches) < 60 / 4, store.batches
    assert store.status == "completed"


def test_a_failed_write_stops_the_writes_but_the_end_is_still_said() -> None:
    class Failing(InMemoryStore):
        def _do_batch(self, *args: object, **kwargs: object) -> None:
            raise OSError("no space left on device")

    store = Failing()
    writer = StoreWriter(store)
    writer.begin(META, TOPOLOGY, QUERIES)
    shown: list[int] = []
    writer.write_frames([frame(0)])
    writer.after_writes(lambda: shown.append(1))
    writer.finish("failed", "it broke", 1, F)
    writer.close()
    assert isinstance(writer.error, OSError) and shown == []
    assert store.status == "failed"


def test_writes_are_spaced_while_frames_keep_closing() -> None:
    store = InMemoryStore()
    writer = StoreWriter(store)
    writer.begin(META, TOPOLOGY, QUERIES)
    counted: list[int] = []
    real = store._do_batch

    def counting(*args: object) -> None:
        counted.append(1)
        real(*args)  # type: ignore[arg-type]

    store._do_batch = counting  # type: ignore[method-assign]
    until = time.monotonic() + 0.6
    k = 0
    while time.monotonic() < until:  # a frame every millisecond for 0.6 s
        writer.write_frames([frame(k)])
        k += 1
        time.sleep(0.001)
    writer.flush()
    writer.close()
    assert len(store.frames) == k
    assert len(counted) <= 12, (len(counted), k)  # WRITE_EVERY_S: about one in 0.1 s


def _within(call: Callable[[], None], limit_s: float = 60.0) -> bool:
    """Whether ``call`` returned (in a thread of its own) before ``limit_s``: a cap on a
    hang, far above what the call takes."""
    done = threading.Thread(target=call, daemon=True)
    done.start()
    done.join(limit_s)
    return not done.is_alive()


def test_a_flush_and_the_end_do_not_wait_out_the_pause_between_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # a pause between writes that would outlast the test: what is waited for must end it
    monkeypatch.setattr(writer_module, "WRITE_EVERY_S", 3600.0)
    store = InMemoryStore()
    writer = StoreWriter(store)
    writer.begin(META, TOPOLOGY, QUERIES)
    writer.write_frames([frame(0)])
    for _ in range(3000):  # the first write is made at once; the pause follows it
        if store.frames:
            break
        time.sleep(0.01)
    assert len(store.frames) == 1
    writer.write_frames([frame(1)])
    assert _within(writer.flush), "flush waited for the pause to end"
    assert len(store.frames) == 2
    writer.write_frames([frame(2)])
    writer.finish("completed", None, 1, 3 * F)
    assert _within(writer.close), "the run's end waited for the pause to end"
    assert len(store.frames) == 3 and store.status == "completed"
