"""The emulated device's link: bulk transfers, timeout and end-of-stream flushes, order, taps."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import threading
import time
from collections.abc import Callable

import numpy as np
import pytest

import streamscope as ss
from streamscope.core.errors import PipelineError
from streamscope.core.records import Kind
from streamscope.pipeline.channels.fifo import EOS, Aborted
from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.describe.resources import LinkSpec
from streamscope.probes.taps import RingTap
from streamscope.runtime.session import prepare

CTX = mp.get_context("fork")


def _link(bulk: int, transfer_ns: float = 0.0, timeout_ns: float = float("inf")) -> LinkChannel:
    ch = LinkChannel("a -> b", 64, CTX, LinkSpec(bulk, transfer_ns, 0.0, timeout_ns), 64)
    send, deliver = RingTap(1, Kind.GET), RingTap(2, Kind.PUT)
    ch.tail_buf.head = send.ring  # ``send``
    ch.head_buf.tail = deliver.ring  # ``deliver``
    ch.taps = (send, deliver)  # type: ignore[attr-defined]
    return ch


def _quietly(body: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        with contextlib.suppress(Aborted):
            body()

    return run


def _run(ch: LinkChannel) -> list[threading.Thread]:
    threads = [threading.Thread(target=_quietly(f), daemon=True) for f in (ch.mover, ch.receiver)]
    for t in threads:
        t.start()
    return threads


def _drain(ch: LinkChannel) -> list[object]:
    out = []
    while (item := ch.get()) is not EOS:
        out.append(item)
    return out


def test_items_cross_in_order_in_full_transfers_and_a_final_flush() -> None:
    ch = _link(4)
    threads = _run(ch)
    for i in range(10):
        ch.put(i)
    ch.put(EOS)
    assert _drain(ch) == list(range(10))
    for t in threads:
        t.join(timeout=5)
    assert ch.transfers == 3  # 4 + 4 + the 2 flushed at the end of stream
    send, deliver = ch.taps  # type: ignore[attr-defined]
    assert len(send.drain()[0]) == len(deliver.drain()[0]) == 10


def test_a_partial_transfer_waits_for_the_timeout() -> None:
    ch = _link(8, timeout_ns=30e6)
    threads = _run(ch)
    t0 = time.monotonic()
    for i in range(3):
        ch.put(i)
    got = [ch.get() for _ in range(3)]
    waited = time.monotonic() - t0
    assert got == [0, 1, 2]
    assert waited >= 0.025  # not before the timeout (never an upper bound: machines are noisy)
    ch.put(EOS)
    assert ch.get() is EOS
    for t in threads:
        t.join(timeout=5)


def test_without_a_timeout_a_partial_transfer_waits_for_more_items() -> None:
    ch = _link(4)
    threads = _run(ch)
    ch.put(1)
    time.sleep(0.05)
    assert ch.head_buf.qsize() == 0  # still in the tail buffer: no transfer yet
    for i in (2, 3, 4):
        ch.put(i)
    assert [ch.get() for _ in range(4)] == [1, 2, 3, 4]
    ch.abort()
    for t in threads:
        t.join(timeout=5)
        assert not t.is_alive()


def test_abort_releases_a_waiting_mover() -> None:
    ch = _link(4)
    threads = _run(ch)
    ch.put(1)
    ch.abort()
    threads[0].join(timeout=5)
    assert not threads[0].is_alive()


def test_link_spec_and_device_are_checked() -> None:
    with pytest.raises(PipelineError, match="bulk_size"):
        LinkSpec(0)
    with pytest.raises(PipelineError, match="transfer_ns"):
        LinkSpec(4, -1.0)
    with pytest.raises(PipelineError, match="timeout_ns"):
        LinkSpec(4, 1.0, 0.0, 0.0)
    dev = ss.EmulatedDevice("gpu", bulk_size=8, transfer_us=20, latency_us=5, timeout_us=100)
    assert dev.kind == "device" and dev.link == LinkSpec(8, 20e3, 5e3, 100e3)


def test_a_channel_to_a_device_is_a_link_with_four_taps() -> None:
    dev = ss.EmulatedDevice("gpu", bulk_size=8)
    p = ss.Pipeline()
    p.add("src", range(3))
    p.add("work", lambda x: x, resource=dev)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink")
    _, topo = prepare(p, ["occupancy(src -> work): mean"], 10**9)
    ch = topo.channel("src -> work")
    assert ch.is_link and ch.bulk_size == 8 and ch.timeout_ns is None
    kinds = sorted(pr.kind for pr in topo.probes if pr.target == "src -> work")
    assert kinds == ["deliver", "head", "send", "tail"]
    domains = {pr.kind: pr.domain for pr in topo.probes if pr.target == "src -> work"}
    assert domains == {"tail": "host", "send": "host", "deliver": "gpu", "head": "gpu"}
    assert topo.channel("work -> sink").is_link  # back to the host: a link too


def test_two_devices_cannot_be_joined() -> None:
    p = ss.Pipeline()
    p.add("a", range(3), resource=ss.EmulatedDevice("d1"))
    p.add("b", print, resource=ss.EmulatedDevice("d2"))
    p.connect("a", "b")
    with pytest.raises(PipelineError, match="two devices"):
        p.topology()


def test_a_buffer_smaller_than_a_transfer_sends_when_full() -> None:
    ch = LinkChannel("a -> b", 4, CTX, LinkSpec(16, 0.0), 64)
    assert ch.link.bulk_size == 4
    threads = _run(ch)
    for i in range(10):
        ch.put(i)
    ch.put(EOS)
    got = []
    while (item := ch.get()) is not EOS:
        got.append(item)
    assert got == list(range(10))
    for t in threads:
        t.join(timeout=5)


def test_array_items_cross_the_link() -> None:
    ch = _link(4)
    threads = _run(ch)
    for i in range(6):
        ch.put(np.full(3, i))
    ch.put(EOS)
    got = _drain(ch)
    assert [int(a[0]) for a in got] == list(range(6))  # type: ignore[index]
    for t in threads:
        t.join(timeout=5)
