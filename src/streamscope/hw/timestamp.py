"""The device's clock as a core (TimeTrial's FPGA agent: Lancaster, Wingbermuehle, Beard &
Chamberlain, Crossing Boundaries in TimeTrial, 2011): a free-running cycle counter
that answers calibration round trips.

In: ``req`` (a strobe: the host's round trip has reached the device; over the register bus, a
write of 1). Out: ``count`` (the cycles since reset, wrapping at ``width`` bits), ``stamp`` (the
count in the cycle of the last request) and ``answered`` (requests so far, so that a host can
tell its answer from a stale one). Read back by the host, each answer is the middle reading of
a round trip, as ``timebase.roundtrip`` takes it from the emulated device's clock: the counter
is that clock with one tick a cycle; ``tests/property/test_hw_timestamp.py`` holds them to each
other.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out


class Timestamp(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``width``: the counter's bits; ``warp_width``: the bits of its ``warp``
    input (0: none)."""

    #: No input is the design's (the host's requests come over the bus) but the warp.
    EVENTS: frozenset[str] = frozenset()
    #: A request acts once per write.
    STROBES = frozenset({"req"})

    def __init__(self, width: int = 48, answer_width: int = 32, warp_width: int = 0) -> None:
        if width < 1 or answer_width < 1 or warp_width < 0:
            raise ValueError("a timestamp counter's widths are at least 1")
        self.width = width
        self.warp_width = warp_width
        if warp_width:
            self.EVENTS = frozenset({"warp"})
        warp = {"warp": In(warp_width)} if warp_width else {}
        super().__init__(
            {"req": In(1), **warp, "count": Out(width), "stamp": Out(width),
             "answered": Out(answer_width)}
        )  # fmt: skip

    def elaborate(self, platform: object) -> Module:
        m = Module()
        step = 1 + self.warp if self.warp_width else 1
        m.d.sync += self.count.eq(self.count + step)
        with m.If(self.req):
            m.d.sync += [self.stamp.eq(self.count), self.answered.eq(self.answered + 1)]
        return m
