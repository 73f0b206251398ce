"""Tap buffers: exact accounting of kept and refused records, implicit sequence numbers."""

from __future__ import annotations

import threading

import numpy as np

from streamscope.core.records import Kind, State
from streamscope.probes.taps import LockedTap, RingTap, StateTracker


def test_locked_tap_refuses_when_full_and_keeps_sequence_numbers() -> None:
    lock = threading.Lock()
    tap = LockedTap(7, Kind.PUT, lock, capacity=4)
    with lock:
        for t in range(10):
            tap.record(100 + t)
    rec, dropped = tap.drain()
    assert dropped == 6
    assert rec["probe"].tolist() == [7] * 4
    assert rec["ticks"].tolist() == [100, 101, 102, 103]
    assert rec["value"].tolist() == [1, 2, 3, 4]
    with lock:
        tap.record(200)
    rec, dropped = tap.drain()
    # The six refused events still count: the next item is the 11th.
    assert dropped == 0
    assert rec["value"].tolist() == [11]


def test_ring_tap_never_both_drops_and_stores() -> None:
    tap = RingTap(3, Kind.STATE, capacity=8)
    kept: list[int] = []
    total_dropped = 0
    n = 0
    for burst in (5, 20, 3, 9, 1):
        for _ in range(burst):
            tap.record(n, n)
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
            tap.record(i, i)
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
    clock = iter(range(100))
    tr = StateTracker("s", tap, lambda: next(clock))
    assert tr.set(State.BUSY) == State.IDLE
    tr.set(State.BUSY)
    prev = tr.set(State.BLOCKED_IN)
    tr.set(prev)
    rec, _ = tap.drain()
    assert rec["value"].tolist() == [State.BUSY, State.BLOCKED_IN, State.BUSY]
