"""A ring that something else overwrote: its reader and its writers never fault, never trust a
position, count or kind it holds beyond its bounds, and the native core and its twin agree.

Each example fills a ring with the real writers' records (the native core's on one copy, the
twin's on another, both shared mappings read as the monitor reads them: from another process's
point of view, so the read slots are given back), overwrites words, bytes or spans of both alike
(header fields included), then drains and writes on. Both copies must say the same: records
drained, refusals, the damage found, what the writers kept, which rings ``astir`` marks, and every
byte of the ring but the sampled nanoseconds (read off a clock: whether an overwritten one looks
sound again depends on them, so the cost's verdict is not compared, only bounded).
"""

from __future__ import annotations

import ctypes
import os
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamscope.core import native, rings
from streamscope.core.records import Kind
from streamscope.transport.ringreader import (
    COST,
    POSITIONS,
    READ_POSITION,
    RingReader,
    known_kinds,
)

IMPLS = native.implementations()
needs_native = pytest.mark.skipif(
    "native" not in IMPLS, reason="the native core was not built on this machine"
)
SETTINGS = settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))

_I64 = (-(1 << 63), (1 << 63) - 1)
_i64 = st.integers(*_I64)
_COST_NS = rings.W_COST_NS * 8

#: Values an overwritten word is given: the edges, and around what the ring holds.
_edges = st.one_of(
    st.sampled_from([0, 1, -1, 2, 7, 8, 9, 63, 64, 65, *_I64, _I64[1] - 1, _I64[0] + 1]),
    st.integers(-200, 200),
    _i64,
)
DAMAGE = st.lists(
    st.one_of(
        st.tuples(st.just("word"), st.integers(0, rings.W_R + 7), _edges),
        st.tuples(st.just("flip"), st.integers(0, 10_000), st.integers(0, 7)),
        st.tuples(st.just("span"), st.integers(0, 10_000), st.binary(min_size=1, max_size=96)),
    ),
    min_size=1,
    max_size=4,
)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("record"), _i64),
        st.tuples(st.just("write"), st.integers(0, 20), st.integers(0, 9), _i64, _i64),
        st.tuples(st.just("refuse"), st.integers(0, 3)),
        st.tuples(st.just("add"), st.integers(-5, 5)),
        st.tuples(st.just("drain"), st.one_of(st.none(), st.integers(0, 70))),
        st.tuples(st.just("reopen")),
    ),
    max_size=12,
)


class Side:
    """One implementation's writer over a shared mapping, and the monitor's reader of it."""

    def __init__(self, impl: Any, capacity: int) -> None:
        self.impl = impl
        size = rings.ring_bytes(capacity)
        fd = os.memfd_create("ring")
        try:
            os.ftruncate(fd, size)
            self.mem = rings.map_shared(fd, size)
        finally:
            os.close(fd)
        self.mem[:] = bytes(rings.anonymous_ring(3, int(Kind.PUT), capacity))
        # Written by "another process": the reader gives back the pages it has read.
        struct.pack_into("<q", self.mem, rings.W_PID * 8, 1)
        self.size = size
        self.ring = impl.Ring(self.mem, impl.Clock("manual", start=1000))
        self.reader = RingReader(self.mem)
        self.log: list[Any] = []

    def apply(self, op: tuple[Any, ...]) -> None:
        name, *args = op
        g = self.ring
        if name == "record":
            self.log.append(g.record(args[0]))
        elif name == "write":
            self.log.append(g.write(*args))
        elif name == "refuse":
            g.refuse(args[0])
        elif name == "add":
            g.add(args[0])
        elif name == "drain":
            d = self.reader.drain(args[0])
            assert 0 <= len(d.records) <= max(self.reader.capacity, 0)
            assert d.dropped >= 0 and d.cost_n >= 0 and d.cost_ns >= 0
            recs = d.records[known_kinds(d.records)]
            self.log.append(
                ("drain", recs.tobytes(), len(d.records), d.dropped, d.total, d.last, d.refused,
                 d.left_ticks, {k: n for k, n in self.reader.damage.items() if k != COST},
                 self.reader.pending)
            )  # fmt: skip
        elif name == "reopen":  # the monitor finds the ring only now
            try:
                self.reader = RingReader(self.mem)
                self.log.append(("reopened", self.reader.capacity, self.reader.probe))
            except ValueError as exc:
                self.log.append(("refused", str(exc)))
        flags = np.zeros(1, dtype=np.uint8)
        self.impl.astir(np.array([ctypes.addressof(self.mem)], dtype=np.uint64), flags)
        self.log.append((g.free(), g.written, g.dropped, g.read, g.total, int(flags[0])))

    def damage(self, edits: list[tuple[Any, ...]]) -> None:
        for what, at, arg in edits:
            if what == "word":
                struct.pack_into("<q", self.mem, at * 8, arg)
            elif what == "flip":
                at %= self.size
                self.mem[at] = bytes([self.mem[at][0] ^ (1 << arg)])
            else:
                at %= self.size
                self.mem[at : at + len(arg)] = arg[: self.size - at]

    def image(self) -> bytes:
        """Every byte of the ring but the sampled nanoseconds (read off a clock)."""
        data = bytes(self.mem)
        return data[:_COST_NS] + data[_COST_NS + 8 :]


@needs_native
@SETTINGS
@given(
    capacity=st.sampled_from([0, 1, 4, 64, 256]),
    before=st.integers(0, 400),
    drained=st.one_of(st.none(), st.integers(0, 300)),
    rounds=st.lists(st.tuples(DAMAGE, OPS), min_size=1, max_size=3),
)
def test_a_damaged_ring_is_read_alike_by_both_cores_and_never_faults(
    capacity: int,
    before: int,
    drained: int | None,
    rounds: list[tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]],
) -> None:
    sides = [Side(IMPLS["native"], capacity), Side(IMPLS["python"], capacity)]
    values = [v * 0x9E3779B97F4A7C15 % (1 << 64) - (1 << 63) for v in range(before)]
    for side in sides:
        side.log += [side.ring.record(v) for v in values]
        side.apply(("drain", drained))
        side.log += [side.ring.record(v) for v in values[:100]]
        for edits, after in rounds:
            side.damage(edits)
            for op in after:
                side.apply(op)
        for op in [("drain", None), ("record", 5), ("drain", None)]:
            side.apply(op)
    a, b = sides
    assert a.log == b.log
    assert a.image() == b.image()
    # Whatever was found, the reader and the writer agree again after it: a record written
    # now is the next drain's one record (unless the reader was opened on a damaged header,
    # whose words it then takes as they were).
    reopened = any(op[0] == "reopen" for _, after in rounds for op in after)
    for side in sides:
        if side.reader.capacity and not reopened:
            assert side.reader.pending == 0
            assert side.ring.record(42)
            assert side.reader.drain().records["value"].tolist() == [42]


@pytest.mark.parametrize("impl", sorted(IMPLS))
def test_overwritten_positions_are_counted_once_and_reading_goes_on(impl: str) -> None:
    side = Side(IMPLS[impl], 64)
    for v in range(10):
        side.apply(("record", v))
    side.apply(("drain", None))
    side.damage([("word", rings.W_W, 1 << 50), ("word", rings.W_R, -3)])
    for _ in range(3):
        side.apply(("drain", None))
    for v in range(100, 110):
        side.apply(("record", v))
    d = side.reader.drain()
    assert d.records["value"].tolist() == list(range(100, 110))
    assert side.reader.damage == {POSITIONS: 1, READ_POSITION: 1}
    stats = side.reader.stats()
    assert stats.written == 20 and stats.dropped == 0
