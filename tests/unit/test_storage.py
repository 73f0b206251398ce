"""Probe storage (DeVille, Troxel & George 2005, §3.2, §5.2): hand-worked arbiter cycles and exact drop accounting."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from streamscope.core.records import Kind, Records
from streamscope.probes.storage import (
    CentralPort,
    CentralStorage,
    DistributedPort,
    DistributedStorage,
    make_storage,
)
from streamscope.probes.taps import Tap


def drain_all(taps: list[Tap]) -> tuple[list[tuple[int, int, int]], dict[int, int]]:
    """(probe, ticks, value) of every record in drain order, and refused counts per probe."""
    rows: list[tuple[int, int, int]] = []
    dropped: dict[int, int] = {}
    for tap in taps:
        rec, d = tap.drain()
        rows.extend(
            zip(rec["probe"].tolist(), rec["ticks"].tolist(), rec["value"].tolist(), strict=True)
        )
        if d:
            dropped[tap.probe] = dropped.get(tap.probe, 0) + d
    return rows, dropped


def every_cycle(ports: list[CentralPort], cycles: int) -> list[list[bool]]:
    """Each port offers one sample per cycle (ticks = value = cycle); the accept pattern."""
    return [[p.offer(c, c, cycle=c) for p in ports] for c in range(cycles)]


def assert_balanced(ports: list[CentralPort]) -> None:
    for p in ports:
        assert p.offered == p.written + p.contention + p.overflow, p


def test_two_probes_two_ports_never_drop() -> None:
    st = CentralStorage(ports=2)
    ports = [st.port(0), st.port(1)]
    accepted = every_cycle(ports, 100)
    assert all(all(row) for row in accepted)
    st.settle()
    rows, dropped = drain_all(st.taps())
    assert dropped == {}
    assert [p.written for p in ports] == [100, 100]
    # Written in grant order: cycle c's samples at cycle c + 1, probe 0 then 1 (round robin
    # restarts after probe 1 each cycle).
    assert rows == [(p, c, c) for c in range(100) for p in (0, 1)]
    assert_balanced(ports)


def test_four_probes_two_ports_drop_exactly_half_in_steady_state() -> None:
    st = CentralStorage(ports=2)
    ports = [st.port(k) for k in range(4)]
    n = 10
    accepted = every_cycle(ports, n)
    # Cycle 0: all four hold registers are empty. From then on the arbiter frees probes {0, 1}
    # and {2, 3} on alternate cycles, so exactly two of the four samples of a cycle are kept.
    assert accepted[0] == [True] * 4
    for c in range(1, n):
        assert accepted[c] == ([True, True, False, False] if c % 2 else [False, False, True, True])
    assert [p.contention for p in ports] == [4, 4, 5, 5]
    st.settle()
    rows, dropped = drain_all(st.taps())
    assert dropped == {0: 4, 1: 4, 2: 5, 3: 5}
    assert len(rows) == 4 * n - 18 == 2 * n + 2
    assert_balanced(ports)


def test_round_robin_starts_after_the_last_probe_granted() -> None:
    st = CentralStorage(ports=1)
    ports = [st.port(k) for k in (10, 11, 12)]
    every_cycle(ports, 9)
    st.settle()
    rows, _ = drain_all(st.taps())
    # Grant at cycle k >= 1 goes to probe (k - 1) % 3, which then takes a new sample at cycle k
    # and waits for the next turn three cycles later.
    probes = [r[0] for r in rows]
    assert probes == [10, 11, 12] * (len(rows) // 3) + [10, 11, 12][: len(rows) % 3]
    assert [r[1] for r in rows[:6]] == [0, 0, 0, 1, 2, 3]
    assert [p.written for p in ports] == [4, 4, 3]  # 3 at cycle 0, then one per cycle


def test_round_robin_skips_idle_probes_fairly() -> None:
    st = CentralStorage(ports=1)
    a, _idle, b = st.port(0), st.port(1), st.port(2)
    kept = []
    for c in range(12):
        kept.append((a.offer(c, c, cycle=c), b.offer(c, c, cycle=c)))
    st.settle()
    # Probes 0 and 2 alternate: neither starves, one port serves one sample per cycle.
    assert abs(a.written - b.written) <= 1
    assert a.written + b.written == 13  # two at cycle 0, then one per cycle
    rows, _ = drain_all(st.taps())
    assert [r[0] for r in rows] == [0, 2] * 6 + [0]


def test_hold_two_absorbs_a_burst_that_hold_one_refuses() -> None:
    def burst(hold: int) -> tuple[CentralStorage, list[CentralPort]]:
        st = CentralStorage(ports=1, hold=hold)
        ports = [st.port(0), st.port(1)]
        every_cycle(ports, 2)
        st.settle()
        return st, ports

    _, ports1 = burst(1)
    assert [p.contention for p in ports1] == [0, 1]
    st2, ports2 = burst(2)
    assert [p.contention for p in ports2] == [0, 0]
    rows, _ = drain_all(st2.taps())
    # The hold register is a FIFO: each probe's oldest sample is written first.
    assert rows == [(0, 0, 0), (1, 0, 0), (0, 1, 1), (1, 1, 1)]


def test_at_most_one_grant_per_probe_per_cycle() -> None:
    st = CentralStorage(ports=2, hold=3)
    p = st.port(0)
    assert [p.offer(0, v, cycle=0) for v in range(4)] == [True, True, True, False]
    p.offer(1, 9, cycle=1)  # cycle 1 grants one: the register has room again
    assert (p.written, len(p.held)) == (1, 3)


def test_explicit_and_derived_cycles_agree() -> None:
    def run(explicit: bool) -> list[tuple[int, int, int]]:
        st = CentralStorage(ports=1, cycle_ticks=10)
        ports = [st.port(0), st.port(1)]
        for t in range(0, 200, 3):
            for k, p in enumerate(ports):
                p.offer(t, t * 2 + k, cycle=t // 10 if explicit else None)
        st.settle()
        return drain_all(st.taps())[0]

    assert run(True) == run(False)


def test_explicit_cycle_overrides_ticks_and_never_goes_backwards() -> None:
    st = CentralStorage(ports=1, cycle_ticks=10)
    p = st.port(0)
    # Same ticks, distinct explicit cycles: one sample per cycle, all kept.
    assert [p.offer(5, v, cycle=v) for v in range(3)] == [True, True, True]
    q = CentralStorage(ports=1, cycle_ticks=10).port(0)
    # Derived cycles: all three in cycle 0, the hold register takes one.
    assert [q.offer(5 + v, v) for v in range(3)] == [True, False, False]
    assert q.contention == 2
    # An earlier cycle counts as the current one (cycle 2): the register is still full.
    assert p.offer(6, 99, cycle=0) is False
    assert p.offer(7, 100, cycle=3) is True


def test_overflow_is_counted_at_the_probe_whose_sample_found_the_buffer_full() -> None:
    st = CentralStorage(ports=1, capacity=2)
    a, b = st.port(7), st.port(9)
    assert a.offer(0, 1, cycle=0)
    assert a.offer(1, 2, cycle=1)  # cycle 1 writes a's first sample
    assert b.offer(2, 3, cycle=2)  # cycle 2 writes a's second: the buffer is now full
    # Cycle 3 grants b's sample into the full buffer (an overflow at b, which frees b's hold
    # register), then b's new sample is held.
    assert b.offer(3, 4, cycle=3)
    assert (a.written, a.overflow, b.written, b.overflow, b.contention) == (2, 0, 0, 1, 0)


def test_overflow_accounting_exact() -> None:
    st = CentralStorage(ports=1, capacity=2)
    a, b = st.port(7), st.port(9)
    a.offer(0, 1, cycle=0)
    a.offer(1, 2, cycle=1)
    b.offer(2, 3, cycle=2)
    st.settle()  # a's second at cycle 2, b's at cycle 3 into a full buffer
    assert (a.written, a.overflow, b.written, b.overflow) == (2, 0, 0, 1)
    taps = st.taps()
    rows, dropped = drain_all(taps)
    assert rows == [(7, 0, 1), (7, 1, 2)]
    assert dropped == {9: 1}
    b.offer(10, 5, cycle=10)
    st.settle()
    rows, dropped = drain_all(taps)
    assert rows == [(9, 10, 5)]
    assert dropped == {}
    assert_balanced([a, b])


def test_settle_writes_every_held_sample() -> None:
    st = CentralStorage(ports=1, hold=4)
    ports = [st.port(k) for k in range(3)]
    for v in range(4):
        for p in ports:
            p.offer(0, v, cycle=0)
    assert st.pending == 12
    rows, _ = drain_all(st.taps())
    assert rows == []
    st.settle()
    assert st.pending == 0
    rows, dropped = drain_all(st.taps())
    assert len(rows) == 12
    assert dropped == {}
    # One grant per cycle, round robin, each probe's samples in order.
    assert [r[0] for r in rows] == [0, 1, 2] * 4
    assert [r[2] for r in rows] == [v for v in range(4) for _ in range(3)]
    assert st.cycle == 12


def test_lazy_arbiter_stops_when_nothing_is_held() -> None:
    st = CentralStorage()
    p = st.port(0)
    p.offer(0, 1, cycle=0)
    p.offer(1 << 40, 2, cycle=1 << 40)  # a huge gap costs one granted cycle, not 2**40
    assert p.written == 1
    assert st.cycle == 1 << 40


def test_taps_shared_buffer_first_then_ports() -> None:
    st = CentralStorage(Kind.SAMPLE)
    ports = [st.port(3), st.port(1)]
    taps = st.taps()
    assert taps[1:] == [p.tap for p in ports]
    assert all(t.kind == int(Kind.SAMPLE) for t in taps)
    assert taps[0].cap == st.capacity and all(p.tap.cap == 0 for p in ports)
    for p in ports:
        p.offer(0, 42, cycle=0)
    st.settle()
    rec, dropped = taps[0].drain()
    assert dropped == 0
    assert sorted(rec["probe"].tolist()) == [1, 3]
    for port in ports:
        rec, dropped = port.tap.drain()
        assert len(rec) == 0
        assert dropped == 0


def test_a_sample_wider_than_64_bits_is_refused_in_the_callers_thread() -> None:
    st = CentralStorage()
    p = st.port(0)
    with pytest.raises(OverflowError, match="64 bits"):
        p.offer(0, 1 << 63, cycle=0)
    assert p.offer(0, -(1 << 63), cycle=0)
    st.settle()
    rows, _ = drain_all(st.taps())
    assert rows == [(0, 0, -(1 << 63))]
    assert p.offered == p.written == 1
    with pytest.raises(OverflowError):
        DistributedStorage().port(0).offer(0, 1 << 64)


def test_registering_a_probe_twice_is_an_error() -> None:
    st = CentralStorage()
    st.port(1)
    with pytest.raises(ValueError, match="already"):
        st.port(1)
    ds = DistributedStorage()
    ds.port(1)
    with pytest.raises(ValueError, match="already"):
        ds.port(1)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"capacity": 3}, "power of two"),
        ({"ports": 0}, "write port"),
        ({"hold": 0}, "hold register"),
        ({"cycle_ticks": 0}, "cycle_ticks"),
    ],
)
def test_bad_central_parameters(kwargs: dict[str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        CentralStorage(**kwargs)


def test_make_storage_names_and_errors() -> None:
    for name in ("centralized", "central", "centralised", " Centralized "):
        s = make_storage(name, ports=4)
        assert isinstance(s, CentralStorage)
        assert s.scheme == "centralized"
        assert s.ports == 4
    d = make_storage("distributed", capacity=8)
    assert isinstance(d, DistributedStorage)
    assert d.scheme == "distributed"
    with pytest.raises(ValueError, match="expected 'centralized' or 'distributed'"):
        make_storage("shared")
    with pytest.raises(ValueError, match="no parameter 'ports'"):
        make_storage("distributed", ports=2)
    with pytest.raises(ValueError, match="valid: capacity, ports"):
        make_storage("central", width=2)


def test_distributed_writes_every_sample_until_its_own_buffer_is_full() -> None:
    ds = DistributedStorage(capacity=4)
    a, b = ds.port(0), ds.port(1)
    assert isinstance(a, DistributedPort)
    assert all(a.offer(c, c, cycle=c) for c in range(4))
    assert a.offer(4, 4) is False  # only its own buffer is full
    assert all(b.offer(c, 10 + c) for c in range(3))
    assert (a.offered, a.written, a.overflow, a.contention) == (5, 4, 1, 0)
    ds.settle()
    assert ds.taps() == [a.tap, b.tap]
    rows, dropped = drain_all(ds.taps())
    assert rows == [(0, c, c) for c in range(4)] + [(1, c, 10 + c) for c in range(3)]
    assert dropped == {0: 1}
    assert a.offer(5, 5)
    rows, dropped = drain_all(ds.taps())
    assert rows == [(0, 5, 5)]
    assert dropped == {}


def test_concurrent_writers_and_drainer_lose_and_duplicate_nothing() -> None:
    st = CentralStorage(ports=2, capacity=64)
    groups = [[st.port(0), st.port(1)], [st.port(2), st.port(3)]]
    taps = st.taps()
    n = 20_000
    done = threading.Event()
    parts: list[Records] = []
    refused: dict[int, int] = {}

    def write(ports: list[CentralPort]) -> None:
        for i in range(n):
            for p in ports:
                p.offer(i, i, cycle=i)

    def drain() -> None:
        while not done.is_set():
            for tap in taps:
                rec, d = tap.drain()
                parts.append(rec)
                refused[tap.probe] = refused.get(tap.probe, 0) + d

    writers = [threading.Thread(target=write, args=(g,)) for g in groups]
    drainer = threading.Thread(target=drain)
    drainer.start()
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    done.set()
    drainer.join()
    st.settle()
    for tap in taps:
        rec, d = tap.drain()
        parts.append(rec)
        refused[tap.probe] = refused.get(tap.probe, 0) + d
    rec = np.concatenate(parts)
    ports = groups[0] + groups[1]
    for p in ports:
        assert p.offered == n
        assert p.offered == p.written + p.contention + p.overflow
        mine = rec["value"][rec["probe"] == p.probe]
        assert len(mine) == p.written
        assert refused[p.probe] == p.contention + p.overflow
        # Each probe's samples come out once, in the order they were taken.
        assert np.all(np.diff(mine) > 0)
    assert sum(p.overflow for p in ports) > 0 or sum(p.written for p in ports) <= 64
