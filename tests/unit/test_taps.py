"""Taps: exact accounting of kept and refused records, sequence numbers, published rings."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from streamscope.core import native
from streamscope.core.records import Kind, State
from streamscope.core.rings import JOURNAL
from streamscope.core.stream import EOS
from streamscope.pipeline.channels.fifo import ThreadChannel
from streamscope.probes.taps import Recorder, RingTap, make_tracker
from streamscope.transport.ringreader import RingReader


def test_a_tapped_channel_records_sequence_numbers_and_refuses_when_full() -> None:
    ch = ThreadChannel(0, name="c")
    tail = RingTap(7, Kind.PUT, capacity=4, clock=native.Clock("manual", start=100))
    ch.tail = tail.ring
    for i in range(10):
        ch.put(i)
        tail.ring.clock.advance(1)
    rec, dropped = tail.drain()
    assert dropped == 6
    assert rec["probe"].tolist() == [7] * 4
    assert rec["ticks"].tolist() == [100, 101, 102, 103]
    assert rec["value"].tolist() == [1, 2, 3, 4]
    ch.put(99)
    rec, dropped = tail.drain()
    # The six refused events still count: the next item is the 11th.
    assert dropped == 0
    assert rec["value"].tolist() == [11]
    ch.put(EOS)  # not an item: neither counted nor recorded
    ch.put(100)
    assert tail.drain()[0]["value"].tolist() == [12]


def test_ring_tap_never_both_drops_and_stores() -> None:
    tap = RingTap(3, Kind.STATE, capacity=8)
    kept: list[int] = []
    total_dropped = 0
    n = 0
    for burst in (5, 20, 3, 9, 1):
        for _ in range(burst):
            tap.ring.record_at(n, n)
            n += 1
        rec, dropped = tap.drain()
        kept.extend(rec["value"].tolist())
        total_dropped += dropped
    assert len(kept) + total_dropped == n
    assert kept == sorted(kept)
    assert len(set(kept)) == len(kept)


def test_ring_tap_concurrent_writer_and_drainer_lose_nothing() -> None:
    tap = RingTap(1, Kind.STATE, capacity=64)
    n = 50_000
    done = threading.Event()

    def write() -> None:
        for i in range(n):
            tap.ring.record_at(i, i)
        done.set()

    kept: list[np.ndarray] = []
    dropped = 0
    t = threading.Thread(target=write)
    t.start()
    while not done.is_set():
        rec, d = tap.drain()
        kept.append(rec["value"])
        dropped += d
    t.join()
    rec, d = tap.drain()
    kept.append(rec["value"])
    dropped += d
    values = np.concatenate(kept)
    assert len(values) + dropped == n
    assert np.all(np.diff(values) > 0)


def test_state_tracker_records_only_changes() -> None:
    tap = RingTap(2, Kind.STATE, capacity=16)
    tr = make_tracker("s", tap)
    assert tr.set(State.BUSY) == State.IDLE
    tr.set(State.BUSY)
    prev = tr.set(State.BLOCKED_IN)
    tr.set(prev)
    rec, _ = tap.drain()
    assert rec["value"].tolist() == [State.BUSY, State.BLOCKED_IN, State.BUSY]


def test_published_rings_appear_whole_in_the_directory_and_only_the_monitor_drains_them(
    tmp_path: Path,
) -> None:
    rec = Recorder(str(tmp_path), capacity=8)
    tap = rec.tap(3, Kind.PUT)
    assert [p.suffix for p in tmp_path.iterdir() if p.name != JOURNAL] == [".ring"]
    assert (tmp_path / JOURNAL).read_text().split() == ["R", next(tmp_path.glob("*.ring")).name]
    tap.ring.record(5)
    with pytest.raises(RuntimeError, match="monitor's to drain"):
        tap.drain()
    reader = RingReader.open(next(tmp_path.glob("*.ring")))
    assert (reader.probe, reader.kind, reader.capacity) == (3, int(Kind.PUT), 8)
    assert reader.drain().records["value"].tolist() == [5]


def test_a_ring_inherited_by_a_forked_child_records_nothing_there() -> None:
    tap = RingTap(1, Kind.SAMPLE, capacity=8)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's ring is not its to write
        os.write(w, b"1" if tap.ring.record(1) else b"0")
        os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"0"
    assert tap.ring.written == 0 and tap.ring.dropped == 0
    assert tap.ring.record(2)
