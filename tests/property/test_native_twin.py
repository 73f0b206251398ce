"""The native probe core and its pure-Python twin, side by side on the same inputs.

Every record, refusal, counter and FIFO outcome must agree exactly; the emulated clock must give
the same ticks as ``timebase.emulated.EmulatedClock`` at any host time.
"""

from __future__ import annotations

import math
import queue
import threading
from types import ModuleType
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.core import native, rings
from streamscope.core.records import Kind
from streamscope.core.stream import EOS
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec
from streamscope.transport.ringreader import RingReader

IMPLS = native.implementations()
needs_native = pytest.mark.skipif(
    "native" not in IMPLS, reason="the native core was not built on this machine"
)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

_i64 = st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1)
_small = st.integers(min_value=0, max_value=1 << 40)

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), _i64),
        st.tuples(st.just("record_at"), _small, _i64),
        st.tuples(
            st.just("write"),
            st.integers(1, 9),
            st.integers(0, (1 << 32) - 1),
            _small,
            _i64,
        ),
        st.tuples(st.just("refuse"), st.integers(0, 5)),
        st.tuples(st.just("add"), st.integers(0, 1000)),
        st.tuples(st.just("advance"), st.integers(0, 10_000)),
        st.tuples(st.just("drain"), st.one_of(st.none(), st.integers(0, 9))),
        st.tuples(st.just("enter"), st.integers(1, 70)),
        st.tuples(st.just("exit")),
        st.tuples(st.just("state"), st.integers(0, 3)),
        st.tuples(st.just("put"), st.integers(-5, 5)),
        st.tuples(st.just("get")),
        st.tuples(st.just("eos")),
        st.tuples(st.just("take"), st.integers(0, 3)),
        st.tuples(st.just("take_stamped"), st.integers(0, 3)),
    ),
    max_size=400,
)


class Side:
    """One implementation's objects, driven op by op; it logs everything observable."""

    def __init__(
        self, impl: ModuleType, capacity: int, fifo_cap: int, stamped: bool = False
    ) -> None:
        self.impl = impl
        self.clock = impl.Clock("manual", start=1000)
        self.mems = {
            name: rings.anonymous_ring(probe, kind, capacity)
            for name, probe, kind in (
                ("main", 3, int(Kind.SAMPLE)),
                ("state", 4, int(Kind.STATE)),
                ("tail", 5, int(Kind.PUT)),
                ("head", 6, int(Kind.GET)),
                ("trace", 7, int(Kind.ENTER)),
            )
        }
        self.rings = {k: impl.Ring(m, self.clock) for k, m in self.mems.items()}
        self.readers = {k: RingReader(m) for k, m in self.mems.items()}
        self.tracker = impl.StateTracker("stage", self.rings["state"])
        self.fifo = impl.Fifo(fifo_cap)
        self.fifo.tail = self.rings["tail"]
        self.fifo.head = self.rings["head"]
        if stamped:
            self.fifo.keep_stamps()
        self.stack: list[int] = []
        self.log: list[Any] = []

    def apply(self, op: tuple[Any, ...]) -> None:
        name, *args = op
        r = self.rings["main"]
        if name == "record":
            self.log.append(r.record(args[0]))
        elif name == "record_at":
            self.log.append(r.record_at(*args))
        elif name == "write":
            self.log.append(r.write(*args))
        elif name == "refuse":
            r.refuse(args[0])
        elif name == "add":
            r.add(args[0])
        elif name == "advance":
            self.clock.advance(args[0])
        elif name == "drain":
            for key, reader in self.readers.items():
                d = reader.drain(args[0])
                self.log.append(
                    (key, d.records.tobytes(), d.dropped, d.total, d.last, d.cost_n, d.refused)
                )
        elif name == "enter":
            kept = self.rings["trace"].enter(args[0])
            self.log.append(kept)
            if kept:
                self.stack.append(args[0])
        elif name == "exit":
            if self.stack:
                self.rings["trace"].exit(self.stack.pop())
        elif name == "state":
            self.log.append(self.tracker.set(args[0]))
        elif name in ("put", "eos"):
            try:
                self.fifo.put(EOS if name == "eos" else args[0], False)
                self.log.append("put")
            except queue.Full:
                self.log.append("full")
        elif name == "get":
            try:
                self.log.append(repr(self.fifo.get(False)))
            except queue.Empty:
                self.log.append("empty")
        elif name == "take":
            try:
                self.log.append([repr(x) for x in self.fifo.take(args[0])])
            except ValueError:
                self.log.append("short")
        elif name == "take_stamped":
            try:
                items, stamps = self.fifo.take_stamped(args[0])
                self.log.append(([repr(x) for x in items], stamps))
            except ValueError:
                self.log.append("short")
            except RuntimeError:
                self.log.append("not stamped")

    def final(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            k: (g.written, g.dropped, g.read, g.total, g.last, g.cost_n, g.depth, g.refused)
            for k, g in self.rings.items()
        }
        out["calls"] = self.rings["trace"].calls()
        out["fifo"] = (self.fifo.qsize(), self.fifo.items_in, self.fifo.items_out)
        out["state"] = self.tracker.state
        return out


@needs_native
@SETTINGS
@given(
    ops=OPS,
    capacity=st.sampled_from([0, 1, 2, 4, 8, 64]),
    fifo_cap=st.integers(0, 4),
    stamped=st.booleans(),
)
def test_native_and_twin_agree_on_every_record_and_refusal(
    ops: list[tuple[Any, ...]], capacity: int, fifo_cap: int, stamped: bool
) -> None:
    a = Side(IMPLS["native"], capacity, fifo_cap, stamped)
    b = Side(IMPLS["python"], capacity, fifo_cap, stamped)
    for op in [*ops, ("drain", None)]:
        a.apply(op)
        b.apply(op)
    assert a.log == b.log
    assert a.final() == b.final()


@pytest.mark.parametrize("impl", sorted(IMPLS))
@given(
    events=st.integers(0, 3000),
    capacity=st.sampled_from([1, 2, 16, 256]),
    drains=st.lists(st.integers(0, 3000), max_size=6),
)
@SETTINGS
def test_a_ring_that_fills_counts_every_refusal_exactly(
    impl: str, events: int, capacity: int, drains: list[int]
) -> None:
    m = IMPLS[impl]
    mem = rings.anonymous_ring(1, int(Kind.SAMPLE), capacity)
    ring = m.Ring(mem, m.Clock("manual"))
    reader = RingReader(mem)
    at = sorted(set(drains))
    kept: list[int] = []
    dropped = 0
    expect_kept: list[int] = []
    last_refused = 0
    room = capacity
    for i in range(events):
        if at and at[0] == i:
            at.pop(0)
            d = reader.drain()
            kept += d.records["value"].tolist()
            dropped += d.dropped
            room = capacity
        ok = ring.record(i)
        assert ok == (room > 0)
        if ok:
            expect_kept.append(i)
            room -= 1
        else:
            last_refused = i
    d = reader.drain()
    kept += d.records["value"].tolist()
    dropped += d.dropped
    assert kept == expect_kept
    assert len(kept) + dropped == events == ring.written + ring.dropped
    assert ring.dropped == dropped
    # The latest refused value stays readable: a channel's totals count what came after its
    # last kept record from it.
    assert ring.refused == d.refused == last_refused


@pytest.mark.parametrize("impl", sorted(IMPLS))
@given(
    gaps=st.lists(st.integers(0, 1000), min_size=1, max_size=60),
    ring_cap=st.sampled_from([1, 4, 64]),
    takes=st.lists(st.integers(1, 5), max_size=30),
)
@SETTINGS
def test_each_item_carries_the_ticks_of_its_insertion(
    impl: str, gaps: list[int], ring_cap: int, takes: list[int]
) -> None:
    """A FIFO that keeps stamps hands each item out with the ticks its tail tap read when it
    went in: those of its record where the ring kept one, and the clock's all the same where
    the ring was full and refused it (counted)."""
    m = IMPLS[impl]
    clock = m.Clock("manual", start=10)
    mem = rings.anonymous_ring(5, int(Kind.PUT), ring_cap)
    fifo = m.Fifo(len(gaps) + 1)
    fifo.tail = m.Ring(mem, clock)
    fifo.keep_stamps()
    put_at = []
    for i, gap in enumerate(gaps):
        clock.advance(gap)
        put_at.append(clock.now())
        fifo.put(i)
    fifo.put(EOS)
    got: list[Any] = []
    stamps: list[int] = []
    for n in [*takes, len(gaps) + 1]:
        items, st_ = fifo.take_stamped(min(n, fifo.qsize()))
        got += items
        stamps += st_
    assert got == [*range(len(gaps)), EOS]
    assert stamps == [*put_at, 0]  # the end marker is no item: no stamp
    recs = RingReader(mem).drain()
    kept = recs.records
    assert kept["ticks"].tolist() == [put_at[v - 1] for v in kept["value"].tolist()]
    assert len(kept) + recs.dropped == len(gaps)


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_a_fifos_maxsize_is_writable_as_a_queue_queues(impl: str) -> None:
    """``queue.Queue`` keeps ``maxsize`` as given (<= 0: unbounded) and lets a program change
    it: later puts see the new one, and a larger one lets a waiting put in."""
    m = IMPLS[impl]
    assert m.Fifo(-1).maxsize == -1
    q = m.Fifo(3)
    for i in range(3):
        q.put(i)
    q.maxsize = 2
    assert q.full() and q.maxsize == 2
    with pytest.raises(queue.Full):
        q.put_nowait(3)
    waiting = threading.Thread(target=q.put, args=(3,))
    waiting.start()
    q.maxsize = 5  # the waiting put goes in without any get
    waiting.join(10)
    assert not waiting.is_alive() and q.qsize() == 4
    q.maxsize = 0
    q.put_nowait(4)
    assert [q.get() for _ in range(5)] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_every_event_in_1024_is_timed(impl: str) -> None:
    m = IMPLS[impl]
    mem = rings.anonymous_ring(1, int(Kind.SAMPLE), 1 << 12)
    ring = m.Ring(mem, m.Clock())
    for i in range(5000):
        ring.record(i)
    assert ring.cost_n == math.ceil(5000 / 1024)
    assert ring.cost_ns >= 0


@given(
    spec=st.builds(
        EmulatedClockSpec,
        rate_ppm=st.floats(-100, 100),
        offset_s=st.floats(-1000, 1000),
        drift_ppb_s=st.floats(-10, 10),
        tick_ns=st.floats(0.5, 2000),
        step_at_s=st.one_of(st.none(), st.floats(0, 10)),
        step_ns=st.floats(0, 1e6),
    ),
    epoch=st.integers(0, 1 << 50),
    hosts=st.lists(st.integers(0, 20 * 10**9), min_size=1, max_size=20),
)
@SETTINGS
def test_emulated_clocks_tick_exactly_as_the_reference(
    spec: EmulatedClockSpec, epoch: int, hosts: list[int]
) -> None:
    ref = EmulatedClock(spec, epoch)
    at = [epoch + h for h in hosts]
    want = ref.ticks_at(np.array(at, dtype=np.int64)).tolist()
    for impl in IMPLS.values():
        clock = ref.native_clock(impl)
        assert [clock.ticks_at(h) for h in at] == want
