"""The integrated monitor probe of DeVille, Troxel & George, Performance Monitoring for Run-time
Management of Reconfigurable Devices (CARMA, 2005) as a core: a trigger of parameterised width
and depth with a mask, a comparison and a value per level, matched in sequence; an event counter
of ``count_width`` bits whose wrap-arounds are counted; a sample-and-hold register; a global
trigger output and input.

In (each clock cycle): ``strobe`` with ``value`` (an event presented to the trigger), ``snap``
(the global trigger: capture the count now), and the configuration, which a host writes through
the register map (``hw.regmap``): per level ``mask``, ``match`` and ``op``; ``depth`` (levels in
use, 1..``max_depth``); ``reset_on_mismatch``. Out (registered, the cycle after the event):
``fired`` (the sequence completed: also the global trigger output), ``level``, ``count`` and
``wraps``, ``held`` (the value that fired), ``snap_count``/``snap_wraps``.

The semantics are ``probes.hardware.Trigger`` with a ``CountAction`` and a ``SampleAction``, and
``GlobalTrigger``'s snapshot of the counter; ``tests/property/test_hw_trigger.py`` holds them to
each other cycle by cycle.
"""

from __future__ import annotations

from amaranth.hdl import Array, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

#: The comparison codes of a level's ``op`` register (``probes.hardware.Condition``'s operators).
OPS = {"==": 0, "!=": 1, "<": 2, "<=": 3, ">": 4, ">=": 5}


def _bits(n: int) -> int:
    """Bits to hold 0..n."""
    return max(1, n.bit_length())


class TriggerProbe(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``width``: the value's bits; ``max_depth``: levels built;
    ``count_width``/``wrap_width``: the counter and its wrap count."""

    #: The inputs the design drives each cycle; the others are registers the host writes.
    EVENTS = frozenset({"strobe", "value", "snap"})

    def __init__(
        self, width: int = 8, max_depth: int = 4, count_width: int = 16, wrap_width: int = 16
    ) -> None:
        if width < 1 or max_depth < 1 or count_width < 1 or wrap_width < 1:
            raise ValueError("a trigger probe's widths and depth are at least 1")
        self.width = width
        self.max_depth = max_depth
        self.count_width = count_width
        self.wrap_width = wrap_width
        super().__init__(
            {
                "strobe": In(1),
                "value": In(width),
                "snap": In(1),
                "mask": In(width).array(max_depth),
                "match": In(width).array(max_depth),
                "op": In(3).array(max_depth),
                "depth": In(_bits(max_depth)),
                "reset_on_mismatch": In(1),
                "fired": Out(1),
                "level": Out(_bits(max_depth)),
                "count": Out(count_width),
                "wraps": Out(wrap_width),
                "held": Out(width),
                "snap_count": Out(count_width),
                "snap_wraps": Out(wrap_width),
            }
        )

    def _matches(self, m: Module, i: int) -> Signal:
        """Level ``i``'s condition on this cycle's value: ``(value & mask) OP match``."""
        x = Signal(self.width, name=f"masked{i}")
        hit = Signal(name=f"hit{i}")
        m.d.comb += x.eq(self.value & self.mask[i])
        y = self.match[i]
        with m.Switch(self.op[i]):
            for op, code in OPS.items():
                with m.Case(code):
                    cmp = {"==": x == y, "!=": x != y, "<": x < y, "<=": x <= y, ">": x > y,
                           ">=": x >= y}[op]  # fmt: skip
                    m.d.comb += hit.eq(cmp)
        return hit

    def elaborate(self, platform: object) -> Module:
        m = Module()
        hits = Array(self._matches(m, i) for i in range(self.max_depth))
        nxt = Signal.like(self.level)
        m.d.comb += nxt.eq(self.level)
        with m.If(hits[self.level]):
            m.d.comb += nxt.eq(self.level + 1)
        with m.Elif(self.reset_on_mismatch & (self.level != 0)):
            m.d.comb += nxt.eq(Mux(hits[0], 1, 0))
        m.d.sync += self.fired.eq(0)
        with m.If(self.strobe):
            with m.If(nxt >= self.depth):
                m.d.sync += [self.level.eq(0), self.fired.eq(1), self.held.eq(self.value)]
                m.d.sync += self.count.eq(self.count + 1)
                with m.If(self.count == (1 << self.count_width) - 1):
                    m.d.sync += self.wraps.eq(self.wraps + 1)
            with m.Else():
                m.d.sync += self.level.eq(nxt)
        with m.If(self.snap):
            m.d.sync += [self.snap_count.eq(self.count), self.snap_wraps.eq(self.wraps)]
        return m
