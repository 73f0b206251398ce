"""Pipeline semantics without the monitor's figures: wiring, fan-out/in, ends of stream, errors."""

from __future__ import annotations

import collections
import threading
from pathlib import Path

import numpy as np
import pytest

import streamscope as ss
from streamscope.pipeline.channels.shm import decode_item, encode_item
from streamscope.store.reader import Run


def _run(p: ss.Pipeline, queries: list[str] | None = None) -> ss.RunResult:
    return ss.run(p, queries or [], ss.RunOptions(mode="inline", frame_ns=50_000_000))


class Collect:
    """A sink that keeps what it received (in its own process: only for thread sinks)."""

    def __init__(self) -> None:
        self.items: list[object] = []
        self.lock = threading.Lock()

    def process(self, item: object) -> None:
        with self.lock:
            self.items.append(item)


def test_chain_of_functions_generators_and_classes() -> None:
    class Doubler:
        def setup(self) -> None:
            self.k = 2

        def process(self, x: int) -> int:
            return x * self.k

    def split(x: int):  # type: ignore[no-untyped-def]
        yield x
        yield -x

    out = Collect()
    p = ss.Pipeline()
    p.add("numbers", range(5))
    p.add("double", Doubler())
    p.add("odd_only", lambda x: x if x % 4 else None)
    p.add("split", split)
    p.add("sink", out)
    p.chain("numbers", "double", "odd_only", "split", "sink", capacity=2)
    assert _run(p).status == "completed"
    assert out.items == [2, -2, 6, -6]


def test_fanout_roundrobin_and_broadcast_and_fanin() -> None:
    for fanout, expect in (("roundrobin", 10), ("broadcast", 20)):
        out = Collect()
        p = ss.Pipeline()
        p.add("src", range(10), fanout=fanout)
        p.add("a", lambda x: ("a", x))
        p.add("b", lambda x: ("b", x))
        p.add("sink", out)
        for w in ("a", "b"):
            p.connect("src", w, capacity=3)
            p.connect(w, "sink", capacity=3)
        assert _run(p).status == "completed"
        assert len(out.items) == expect
        by = collections.Counter(tag for tag, _ in out.items)  # type: ignore[misc]
        assert by["a"] == by["b"] == expect // 2


def test_fanin_zip_takes_one_from_each_input() -> None:
    out = Collect()
    p = ss.Pipeline()
    p.add("x", range(4))
    p.add("y", range(10, 16))
    p.add("pair", lambda t: t, fanin="zip")
    p.add("sink", out)
    p.connect("x", "pair")
    p.connect("y", "pair")
    p.connect("pair", "sink")
    _run(p)
    assert out.items[:4] == [(0, 10), (1, 11), (2, 12), (3, 13)]
    assert out.items[4:] == [(14,), (15,)]  # the longer input goes on alone


def test_process_stages_get_the_same_items_in_order() -> None:
    out = Collect()
    p = ss.Pipeline()
    p.add("src", lambda: (np.arange(3) + i for i in range(50)), resource="process")
    p.add("sum", lambda a: float(a.sum()), resource="process")
    p.add("sink", out)
    p.chain("src", "sum", "sink", capacity=4)
    res = _run(p, ["occupancy(src -> sum): mean every 50ms"])
    assert res.status == "completed", res.error
    assert out.items == [float(3 * i + 3) for i in range(50)]


def test_stages_sharing_a_named_process() -> None:
    out = Collect()
    worker = ss.Process("worker")
    p = ss.Pipeline()
    p.add("src", range(20), resource=worker)
    p.add("inc", lambda x: x + 1, resource=worker)
    p.add("sink", out)
    p.chain("src", "inc", "sink")
    topo = p.topology()
    assert {c.name: c.transport for c in topo.channels} == {
        "src -> inc": "thread",
        "inc -> sink": "process",
    }
    assert _run(p).status == "completed"
    assert out.items == list(range(1, 21))


@pytest.mark.parametrize(
    "item",
    [
        0,
        -(1 << 62),
        3.25,
        b"\x00raw",
        "text ✓",
        np.arange(6, dtype=np.float32).reshape(2, 3),
        {"a": [1, 2]},
        None,
    ],
)
def test_item_codec_round_trip(item: object) -> None:
    kind, payload = encode_item(item)
    back = decode_item(kind, payload)
    if isinstance(item, np.ndarray):
        assert isinstance(back, np.ndarray)
        assert back.dtype == item.dtype
        assert np.array_equal(back, item)
    else:
        assert back == item


def test_item_too_large_for_a_slot_is_a_clear_failure() -> None:
    p = ss.Pipeline()
    p.add("src", [b"x" * 100], resource="process")
    p.add("sink", lambda x: None)
    p.connect("src", "sink", slot_bytes=16)
    res = _run(p)
    assert res.status == "failed"
    assert "does not fit" in (res.error or "")
    assert "slot_bytes" in (res.error or "")


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda p: p.connect("a", "nope"), "unknown stage 'nope'"),
        (lambda p: p.add("a", range(3)), "defined twice"),
        (lambda p: p.connect("a", "b", capacity=0), "capacity must be at least 1"),
        (lambda p: p.add("c", 42), "expected a function"),
        (lambda p: p.add("d -> e", print), "bad stage name"),
        (lambda p: p.add("f", print, resource="gpu"), "unknown resource 'gpu'"),
        (lambda p: p.add("g", print, fanout="random"), "fanout must be one of"),
    ],
)
def test_bad_wiring_is_refused_with_a_clear_message(build, message: str) -> None:  # type: ignore[no-untyped-def]
    p = ss.Pipeline()
    p.add("a", range(3))
    p.add("b", print)
    with pytest.raises(ss.PipelineError, match=message):
        build(p)


def test_cycles_and_lonely_stages_are_refused() -> None:
    p = ss.Pipeline()
    p.add("a", lambda x: x)
    p.add("b", lambda x: x)
    p.connect("a", "b")
    p.connect("b", "a")
    with pytest.raises(ss.PipelineError, match="cycle"):
        p.validate()
    q = ss.Pipeline()
    q.add("a", range(3))
    q.add("b", print)
    q.add("alone", print)
    q.connect("a", "b")
    with pytest.raises(ss.PipelineError, match="'alone' is not connected"):
        q.validate()


def test_a_raising_stage_fails_the_run_and_names_itself() -> None:
    def boom(x: int) -> int:
        if x == 3:
            raise ValueError("bad item 3")
        return x

    p = ss.Pipeline()
    p.add("src", range(100))
    p.add("boom", boom)
    p.add("sink", lambda x: None)
    p.chain("src", "boom", "sink", capacity=2)
    res = _run(p, ["state(boom): duty every 50ms"])
    assert res.status == "failed"
    assert "'boom'" in (res.error or "")
    assert "ValueError: bad item 3" in (res.error or "")
    assert "test_pipeline.py" in (res.error or "")
    assert res.store is not None
    assert Run.from_memory(res.store).status == "failed"


def test_terminal_values_say_counts_as_counts_and_bounds_as_plus_minus() -> None:
    from streamscope.aggregate.points import ScalarPoint
    from streamscope.report.terminal import describe_points

    text = describe_points(
        [
            ScalarPoint("mean", 4_250_000.0),
            ScalarPoint("violations", 3.0),
            ScalarPoint("uncertainty_ns", 8280.0),
        ],
        "ns",
    )
    assert text == "mean=4.25ms  violations=3  uncertainty=±8.28us"


def test_run_options_take_the_run_file_as_a_str_too(tmp_path: Path) -> None:
    opts = ss.RunOptions(out=str(tmp_path / "r.duckdb"))  # type: ignore[arg-type]
    assert opts.out == tmp_path / "r.duckdb"
    assert ss.RunOptions().out is None


def test_a_pipeline_files_function_passed_for_its_pipeline_says_to_call_it(tmp_path: Path) -> None:
    def pipeline(argv: list[str]) -> ss.Pipeline:
        p = ss.Pipeline("p")
        p.add("source", range(3))
        p.add("sink", print)
        p.chain("source", "sink")
        return p

    with pytest.raises(ss.ConfigError, match=r"not the function pipeline: call it first, as "
                       r"ss\.run\(pipeline\(\[\]\), \.\.\.\)"):  # fmt: skip
        ss.run(pipeline, [], ss.RunOptions(out=tmp_path / "r.duckdb"))  # type: ignore[arg-type]
    with pytest.raises(ss.ConfigError, match="takes a Pipeline, not str"):
        ss.run("app.py", [])  # type: ignore[arg-type]
    assert not (tmp_path / "r.duckdb").exists()  # nothing ran
