"""What cores that latch per frame share: a frame of ``frame_cycles`` cycles from cycle 0.

In: a module, the ``frame_cycles`` input, the ``frames`` and ``done`` outputs. Out: the signal
that says this cycle is its frame's last (counters latch on it).
"""

from __future__ import annotations

from amaranth.hdl import Module, Signal


def frame_clock(m: Module, frame_cycles: Signal, frames: Signal, done: Signal) -> Signal:
    """Count the cycle's place in its frame; ``frames`` counts frames completed, ``done``
    pulses as one completes. Returns ``last`` (comb): this cycle ends its frame."""
    at = Signal.like(frame_cycles, name="frame_at")
    last = Signal(name="frame_last")
    m.d.comb += last.eq(at + 1 >= frame_cycles)
    m.d.sync += done.eq(0)
    with m.If(last):
        m.d.sync += [at.eq(0), frames.eq(frames + 1), done.eq(1)]
    with m.Else():
        m.d.sync += at.eq(at + 1)
    return last
