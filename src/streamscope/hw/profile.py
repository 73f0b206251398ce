"""PPW+RC's profile counters (Curreri, Koehler, George, Holland & Garcia, Performance Analysis
Framework for High-Level Language Applications in Reconfigurable Computing, 2010) as a core: one
counter per stage state, each counting the clock cycles spent in its state, latched per frame of
``frame_cycles`` cycles.

In (each cycle): ``state`` (the stage's state code: ``core.records.State``'s idle, busy,
blocked_in, blocked_out) and the configuration ``frame_cycles`` (a frame's length in cycles,
written by the host). Out (registered): ``frame_counts`` (the cycles of the last complete frame
in each state), ``frames`` (how many frames have completed: a host reading it twice knows whether
it missed one) and ``done`` (a pulse as a frame completes); ``running`` (the current frame's
counts so far).

The semantics are ``aggregate.stateframes.StateFrames`` on a grid of ``frame_cycles`` ticks from
cycle 0, fed one record per change of state: ``tests/property/test_hw_profile.py`` holds them to
each other frame by frame.
"""

from __future__ import annotations

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from streamscope.hw.framing import frame_clock


class StateProfile(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``states``: counters built (one per state code); ``count_width``: each
    counter's bits (a frame longer than ``2**count_width`` cycles wraps it)."""

    #: The inputs the design drives each cycle; the others are registers the host writes.
    EVENTS = frozenset({"state"})

    def __init__(self, states: int = 4, count_width: int = 32, frame_width: int = 32) -> None:
        if states < 2 or count_width < 1 or frame_width < 1:
            raise ValueError("a state profile needs 2 states or more and widths of at least 1")
        self.states = states
        self.count_width = count_width
        super().__init__(
            {
                "state": In(max(1, (states - 1).bit_length())),
                "frame_cycles": In(frame_width),
                "frame_counts": Out(count_width).array(states),
                "running": Out(count_width).array(states),
                "frames": Out(frame_width),
                "done": Out(1),
            }
        )

    def elaborate(self, platform: object) -> Module:
        m = Module()
        last = frame_clock(m, self.frame_cycles, self.frames, self.done)
        for s in range(self.states):
            now = self.running[s] + (self.state == s)
            with m.If(last):
                m.d.sync += [self.frame_counts[s].eq(now), self.running[s].eq(0)]
            with m.Else():
                m.d.sync += self.running[s].eq(now)
        return m
