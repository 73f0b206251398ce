"""TimeTrial's channel monitor (seed 002's FPGA agent) as a core: a FIFO channel's two ends in,
one frame's sub-queue summary out, reduced on the device.

In (each cycle): ``put`` (an item entered the channel this cycle) and ``get`` (one left it); the
configuration ``frame_cycles`` (a frame's length in cycles, from cycle 0). Out (registered, for
the last complete frame): ``n_in`` and ``n_out`` (items in and out), ``level_start`` (items in
the channel as the frame began), ``occupancy[k]`` (cycles the channel spent holding ``k`` items;
the last bin: that many or more), ``gap_in[j]`` (inter-insertion gaps) and ``gap_out[j]``
(back-to-back inter-departure gaps: a removal whose item was already waiting at the removal
before, so that the gap is a service time); ``frames`` (frames completed) and ``done`` (a pulse
as one completes).

A gap of ``g`` cycles lasts ``g * tick_ns_q8 / 256`` ns and is counted in the bin of the host's
log-linear scale (``aggregate.subqueue.gaps``: octave, then three mantissa bits) found by a
priority encoder: bin ``j`` of the core is the host's bin ``j + 8 * first_octave`` (bin 0 holds
anything shorter than ``2**first_octave`` ns, the last bin anything longer than the core's
``octaves``). The semantics are the host reducer's (``aggregate.subqueue``): cycle ``c`` holds
the level after its own put and get (insertion first), a gap counts in the frame of its later
end, the first record of an end has no gap. ``tests/property/test_hw_channel.py`` holds the
core to the reducer frame by frame.
"""

from __future__ import annotations

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from streamscope.aggregate.subqueue.gaps import MANTISSA_BITS
from streamscope.hw.framing import frame_clock

#: Fraction bits of ``tick_ns_q8``.
TICK_FRACTION_BITS = 8


def _bits(n: int) -> int:
    return max(1, n.bit_length())


def gap_bins_of(octaves: int) -> int:
    """Bins of a core's gap histogram with ``octaves`` octaves."""
    return 1 + (octaves << MANTISSA_BITS)


class ChannelMonitor(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``levels``: occupancy bins; ``count_width``: each counter's bits;
    ``gap_width``: the bits of a gap counter (longer gaps saturate); ``tick_ns_q8``: a cycle's
    length in 1/256 ns; ``first_octave`` and ``octaves``: the gap bins' range."""

    #: The inputs the design drives each cycle; the others are registers the host writes.
    EVENTS = frozenset({"put", "get"})

    def __init__(
        self,
        levels: int = 8,
        count_width: int = 16,
        frame_width: int = 32,
        gap_width: int = 24,
        tick_ns_q8: int = 256,
        first_octave: int = 0,
        octaves: int = 8,
    ) -> None:
        if levels < 2 or min(count_width, frame_width, gap_width, tick_ns_q8, octaves) < 1:
            raise ValueError("a channel monitor needs 2 levels or more, widths and a tick of 1 up")
        if first_octave < 0:
            raise ValueError("first_octave is 0 (1 ns) or more")
        self.levels, self.count_width, self.gap_width = levels, count_width, gap_width
        self.tick_ns_q8, self.first_octave, self.octaves = tick_ns_q8, first_octave, octaves
        self.gap_bins = gap_bins_of(octaves)
        cw = count_width
        super().__init__(
            {
                "put": In(1),
                "get": In(1),
                "frame_cycles": In(frame_width),
                "n_in": Out(cw),
                "n_out": Out(cw),
                "level_start": Out(cw),
                "occupancy": Out(cw).array(levels),
                "gap_in": Out(cw).array(self.gap_bins),
                "gap_out": Out(cw).array(self.gap_bins),
                "frames": Out(frame_width),
                "done": Out(1),
            }
        )

    def _bin(self, m: Module, gap: Signal, name: str) -> Signal:
        """The bin of a gap of ``gap`` cycles (comb)."""
        v = Signal(len(gap) + self.tick_ns_q8.bit_length(), name=f"{name}_ns_q8")
        m.d.comb += v.eq(gap * self.tick_ns_q8)
        msb = Signal(_bits(len(v)), name=f"{name}_msb")
        mant = Signal(MANTISSA_BITS, name=f"{name}_mant")
        for i in range(len(v)):  # the last one set wins: the leading one
            with m.If(v[i]):
                m.d.comb += msb.eq(i)
                if i >= MANTISSA_BITS:  # (below that the gap is under 1 ns: bin 0)
                    m.d.comb += mant.eq(v[i - MANTISSA_BITS : i])
        low = TICK_FRACTION_BITS + self.first_octave  # the place of 2**first_octave ns
        top = self.gap_bins - 1
        out = Signal(_bits(top), name=f"{name}_bin")
        octave = msb - low
        with m.If((v == 0) | (msb < low)):
            m.d.comb += out.eq(0)
        with m.Elif(octave >= self.octaves):
            m.d.comb += out.eq(top)
        with m.Else():
            m.d.comb += out.eq(1 + (octave << MANTISSA_BITS) + mant)
        return out

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cw = self.count_width
        last = frame_clock(m, self.frame_cycles, self.frames, self.done)

        # The level after this cycle's insertion and removal.
        level = Signal(cw)
        after = Signal(cw)
        m.d.comb += after.eq(level + self.put - self.get)
        m.d.sync += level.eq(after)
        start = Signal(cw)  # the running frame's level_start

        # Gaps: cycles since each end's last record (saturating), whether there was one, and
        # whether the item the next removal takes was already waiting at the last removal.
        gmax = (1 << self.gap_width) - 1
        since_in, since_out = Signal(self.gap_width), Signal(self.gap_width)
        seen_in, seen_out, waiting = Signal(), Signal(), Signal()
        for since, seen, strobe in ((since_in, seen_in, self.put), (since_out, seen_out, self.get)):
            with m.If(strobe):
                m.d.sync += [since.eq(1), seen.eq(1)]
            with m.Elif(since != gmax):
                m.d.sync += since.eq(since + 1)
        with m.If(self.get):
            m.d.sync += waiting.eq(after != 0)
        bin_in = self._bin(m, since_in, "in")
        bin_out = self._bin(m, since_out, "out")
        count_in = Signal()
        count_out = Signal()
        m.d.comb += [count_in.eq(self.put & seen_in), count_out.eq(self.get & seen_out & waiting)]

        def counter(out: Signal, running: Signal, inc: object) -> None:
            now = running + inc
            with m.If(last):
                m.d.sync += [out.eq(now), running.eq(0)]
            with m.Else():
                m.d.sync += running.eq(now)

        counter(self.n_in, Signal(cw, name="run_n_in"), self.put)
        counter(self.n_out, Signal(cw, name="run_n_out"), self.get)
        top_level = self.levels - 1
        clipped = Signal(_bits(top_level))
        m.d.comb += clipped.eq(Mux(after >= top_level, top_level, after))
        for k in range(self.levels):
            counter(self.occupancy[k], Signal(cw, name=f"run_occ{k}"), clipped == k)
        for j in range(self.gap_bins):
            counter(self.gap_in[j], Signal(cw, name=f"run_in{j}"), count_in & (bin_in == j))
            counter(self.gap_out[j], Signal(cw, name=f"run_out{j}"), count_out & (bin_out == j))
        with m.If(last):
            m.d.sync += [self.level_start.eq(start), start.eq(after)]
        return m
