"""TimeTrial's channel monitor (the FPGA agent of Lancaster, Wingbermuehle, Beard & Chamberlain,
Crossing Boundaries in TimeTrial, 2011) as a core: a FIFO channel's two ends in,
one frame's sub-queue summary out, reduced on the device.

In (each cycle, driven by the design): ``put`` (an item entered the channel this cycle), ``get``
(one left it), ``frame_end`` (this cycle is its frame's last: the design's frame-edge generator
drives it, say a comparator of the timestamp core against the next edge of the host's grid; the
RTL device drives it at the run's grid); with ``profile_bins``, ``window_end`` (this cycle ends
one of the frame's sub-windows); with ``production``, ``block`` and ``unblock`` (the producer
became blocked on a full channel this cycle, or stopped being so: a state the core keeps);
with ``warp_width`` (simulation only), ``warp``: that many idle cycles came before this one
(no event, no strobe, the level and the producer's state of the cycle before; a cycle that
ends a frame or a sub-window carries none).

Out (registered, for the last complete frame): ``n_in`` and ``n_out`` (items in and out),
``level_start`` (items in the channel as the frame began), ``occupancy[k]`` (cycles the channel
spent holding ``k`` items; the last bin: that many or more); ``frames`` (frames completed) and
``done`` (a pulse as one completes). The frame's arrays live in RAM (a histogram of a few hundred
bins is a few hundred counters otherwise): ``gap_in`` (inter-insertion gaps), ``gap_out``
(back-to-back inter-departure gaps: a removal whose item was already waiting at the removal
before, so that the gap is a service time), with ``production`` ``gap_prod`` (each
inter-insertion gap less the cycles the producer spent blocked in it), with ``profile_bins``
``profile_in`` and ``profile_out`` (the items in and out in each sub-window). Array ``a`` (in
that order, ``ARRAYS``) entry ``i`` is read by writing ``a * ARRAY_SPAN + i`` to ``read_at`` and
reading ``read_data``; ``nonzero_<array>`` (one bit an entry) says which entries are not 0, so a
host reads only those. Each RAM has two halves, one for the running frame and one for the last
(frame parity); an entry the bitmaps do not mark reads 0 and counts from 0, so nothing is
cleared between frames.

A gap of ``g`` cycles lasts ``g * tick_ns_q8 / 256`` ns and is counted in the bin of the host's
log-linear scale (``aggregate.subqueue.gaps``: octave, then three mantissa bits) found by a
priority encoder: bin ``j`` of the core is the host's bin ``j + 8 * first_octave`` (bin 0 holds
anything shorter than ``2**first_octave`` ns, the last bin anything longer than the core's
``octaves``; ``first_octave=0, octaves=42`` are the host's own bins). The semantics are the host
reducer's (``aggregate.subqueue``): cycle ``c`` holds the level after its own put and get
(insertion first), a gap counts in the frame of its later end, the first record of an end has
no gap. ``tests/property/test_hw_channel.py`` holds the core to the reducer frame by frame.
"""

from __future__ import annotations

from typing import Any

from amaranth.hdl import Cat, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamscope.aggregate.subqueue.gaps import MANTISSA_BITS

#: Fraction bits of ``tick_ns_q8``.
TICK_FRACTION_BITS = 8
#: The arrays a host reads through ``read_at`` and ``read_data``, in their order.
ARRAYS = ("gap_in", "gap_out", "gap_prod", "profile_in", "profile_out")
#: Entries between two arrays' first ones in ``read_at``'s space.
ARRAY_SPAN = 512
#: Bits of an entry's place in its array.
ENTRY_BITS = 9


def _bits(n: int) -> int:
    return max(1, n.bit_length())


def gap_bins_of(octaves: int) -> int:
    """Bins of a core's gap histogram with ``octaves`` octaves."""
    return 1 + (octaves << MANTISSA_BITS)


class ChannelMonitor(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``levels``: occupancy bins; ``count_width``: each counter's bits;
    ``gap_width``: the bits of a gap counter (longer gaps saturate); ``tick_ns_q8``: a cycle's
    length in 1/256 ns; ``first_octave`` and ``octaves``: the gap bins' range; ``profile_bins``:
    sub-windows a frame's profile has (0: none); ``production``: production gaps (``block`` and
    ``unblock`` inputs); ``warp_width``: the bits of a ``warp`` input (0: none, as synthesised)."""

    #: The inputs of the default configuration the design drives each cycle (an instance's
    #: ``EVENTS`` add those its options bring).
    EVENTS = frozenset({"put", "get", "frame_end"})

    def __init__(
        self,
        levels: int = 8,
        count_width: int = 16,
        frame_width: int = 32,
        gap_width: int = 24,
        tick_ns_q8: int = 256,
        first_octave: int = 0,
        octaves: int = 8,
        profile_bins: int = 0,
        production: bool = False,
        warp_width: int = 0,
    ) -> None:
        if levels < 2 or min(count_width, frame_width, gap_width, tick_ns_q8, octaves) < 1:
            raise ValueError("a channel monitor needs 2 levels or more, widths and a tick of 1 up")
        if first_octave < 0 or profile_bins < 0 or warp_width < 0:
            raise ValueError("first_octave, profile_bins and warp_width are 0 or more")
        self.levels, self.count_width, self.gap_width = levels, count_width, gap_width
        self.tick_ns_q8, self.first_octave, self.octaves = tick_ns_q8, first_octave, octaves
        self.profile_bins, self.production, self.warp_width = profile_bins, production, warp_width
        self.gap_bins = gap_bins_of(octaves)
        cw = count_width
        self.EVENTS = frozenset(
            {"put", "get", "frame_end"}
            | ({"window_end"} if profile_bins else set())
            | ({"block", "unblock"} if production else set())
            | ({"warp"} if warp_width else set())
        )
        ports: dict[str, Any] = {"put": In(1), "get": In(1), "frame_end": In(1)}
        if profile_bins:
            ports["window_end"] = In(1)
        if production:
            ports["block"] = In(1)
            ports["unblock"] = In(1)
        if warp_width:
            ports["warp"] = In(warp_width)
        if self.gap_bins > ARRAY_SPAN or profile_bins > ARRAY_SPAN:
            raise ValueError(f"at most {ARRAY_SPAN} gap bins and profile sub-windows")
        #: The arrays this core has, and their entries.
        self.arrays = {"gap_in": self.gap_bins, "gap_out": self.gap_bins}
        if production:
            self.arrays["gap_prod"] = self.gap_bins
        if profile_bins:
            self.arrays |= {"profile_in": profile_bins, "profile_out": profile_bins}
        ports |= {
            "read_at": In(_bits(len(ARRAYS) * ARRAY_SPAN - 1)),
            "n_in": Out(cw),
            "n_out": Out(cw),
            "level_start": Out(cw),
            "occupancy": Out(cw).array(levels),
            **{f"nonzero_{a}": Out(n) for a, n in self.arrays.items()},
            "read_data": Out(cw),
            "frames": Out(frame_width),
            "done": Out(1),
        }
        super().__init__(ports)

    @staticmethod
    def address(array: str, entry: int) -> int:
        """What to write to ``read_at`` to read ``entry`` of ``array``."""
        return ARRAYS.index(array) * ARRAY_SPAN + entry

    def _bin(self, m: Module, gap: Any, name: str) -> Signal:
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
        last = self.frame_end
        m.d.sync += self.done.eq(last)
        with m.If(last):
            m.d.sync += self.frames.eq(self.frames + 1)
        warp = self.warp if self.warp_width else 0

        # The level after this cycle's insertion and removal.
        level = Signal(cw)
        after = Signal(cw)
        m.d.comb += after.eq(level + self.put - self.get)
        m.d.sync += level.eq(after)
        start = Signal(cw)  # the running frame's level_start

        # Gaps: cycles since each end's last record (saturating; ``now``: counting this cycle's
        # warp), whether there was one, and whether the item the next removal takes was
        # already waiting at the last removal.
        gmax = (1 << self.gap_width) - 1

        def since_counter(strobe: Any, name: str, step: Any = 1, skipped: Any = None) -> Signal:
            since = Signal(self.gap_width, name=f"since_{name}")
            now = Signal(self.gap_width, name=f"now_{name}")
            wide = since + (warp if skipped is None else skipped)
            m.d.comb += now.eq(Mux(wide > gmax, gmax, wide))
            with m.If(strobe):
                m.d.sync += since.eq(step)
            with m.Elif(now + step <= gmax):
                m.d.sync += since.eq(now + step)
            with m.Else():
                m.d.sync += since.eq(gmax)
            return now

        seen_in, seen_out, waiting = Signal(), Signal(), Signal()
        since_in = since_counter(self.put, "in")
        since_out = since_counter(self.get, "out")
        with m.If(self.put):
            m.d.sync += seen_in.eq(1)
        with m.If(self.get):
            m.d.sync += [seen_out.eq(1), waiting.eq(after != 0)]
        bin_in = self._bin(m, since_in, "in")
        bin_out = self._bin(m, since_out, "out")
        count_in = Signal()
        count_out = Signal()
        m.d.comb += [count_in.eq(self.put & seen_in), count_out.eq(self.get & seen_out & waiting)]

        def counter(out: Signal, running: Signal, inc: Any) -> None:
            now = running + inc
            with m.If(last):
                m.d.sync += [out.eq(now), running.eq(0)]
            with m.Else():
                m.d.sync += running.eq(now)

        counter(self.n_in, Signal(cw, name="run_n_in"), self.put)
        counter(self.n_out, Signal(cw, name="run_n_out"), self.get)
        top_level = self.levels - 1
        clipped = Signal(_bits(top_level))
        held = Signal(_bits(top_level))  # the level through the warp's idle cycles
        m.d.comb += [
            clipped.eq(Mux(after >= top_level, top_level, after)),
            held.eq(Mux(level >= top_level, top_level, level)),
        ]
        for k in range(self.levels):
            inc = (clipped == k) + Mux(held == k, warp, 0) if self.warp_width else clipped == k
            counter(self.occupancy[k], Signal(cw, name=f"run_occ{k}"), inc)
        # The frame's arrays in RAM: the running frame's half, the last frame's.
        half = self.frames[0]
        self._entries: dict[str, Any] = {}
        self._counted(m, "gap_in", count_in, bin_in, half, last)
        self._counted(m, "gap_out", count_out, bin_out, half, last)
        if self.production:
            # Cycles since the last insertion the producer was not blocked (the warp's idle
            # cycles in the state of the cycle before).
            was_blocked, blocked = Signal(), Signal()
            m.d.comb += blocked.eq(Mux(self.block, 1, Mux(self.unblock, 0, was_blocked)))
            m.d.sync += was_blocked.eq(blocked)
            free = ~blocked
            skipped = Mux(was_blocked, 0, warp) if self.warp_width else 0
            since_prod = since_counter(self.put, "prod", free, skipped)
            bin_prod = self._bin(m, since_prod, "prod")
            self._counted(m, "gap_prod", count_in, bin_prod, half, last)
        if self.profile_bins:
            self._profile(m, last, half)
        with m.If(last):
            m.d.sync += [self.level_start.eq(start), start.eq(after)]
        # The host's read: an entry of the last frame, 0 where its tag is an older frame's.
        sel = self.read_at // ARRAY_SPAN
        with m.Switch(sel):
            for name, (value, _) in self._entries.items():
                with m.Case(ARRAYS.index(name)):
                    m.d.comb += self.read_data.eq(value)
        return m

    def _entry(self, m: Module, entry: Any, half: Any, name: str) -> Signal:
        """The RAM address of ``entry`` in ``half``."""
        addr = Signal(ENTRY_BITS + 1, name=name)
        m.d.comb += addr.eq(Cat(entry, half) if len(entry) == ENTRY_BITS else entry)
        if len(entry) != ENTRY_BITS:
            m.d.comb += addr[ENTRY_BITS].eq(half)
        return addr

    def _ram(
        self, m: Module, name: str, half: Any, last: Any, hit: Any, at: Any
    ) -> tuple[Any, Any]:
        """Array ``name``'s RAM (both halves: the frame's parity is the top address bit) and
        bitmaps: which entries the running frame wrote (an entry it did not reads 0: nothing is
        cleared between frames) and, latched as it ends, the last frame's
        (``nonzero_<name>``). Returns the write port and whether entry ``at`` was written."""
        n = self.arrays[name]
        cw = self.count_width
        mem = Memory(shape=cw, depth=2 * ARRAY_SPAN, init=[])
        m.submodules[f"ram_{name}"] = mem
        w = mem.write_port()
        host = mem.read_port(domain="comb")
        entry = Signal(ENTRY_BITS, name=f"read_entry_{name}")
        m.d.comb += entry.eq(self.read_at[:ENTRY_BITS])
        m.d.comb += host.addr.eq(self._entry(m, entry, ~half, f"read_addr_{name}"))
        nonzero = getattr(self, f"nonzero_{name}")
        value = Signal(cw, name=f"read_{name}")
        fresh = (entry < n) & nonzero.bit_select(entry, 1)
        m.d.comb += value.eq(Mux(fresh, host.data, 0))
        self._entries[name] = (value, host)
        seen = Signal(n, name=f"seen_{name}")
        now = Signal(n, name=f"seen_now_{name}")
        m.d.comb += now.eq(seen)
        with m.If(hit):
            m.d.comb += now.bit_select(at, 1).eq(1)
        with m.If(last):
            m.d.sync += [nonzero.eq(now), seen.eq(0)]
        with m.Else():
            m.d.sync += seen.eq(now)
        m.d.comb += [w.addr.eq(self._entry(m, at, half, f"addr_{name}")), w.en.eq(hit)]
        return w, seen.bit_select(at, 1)

    def _counted(self, m: Module, name: str, hit: Any, at: Any, half: Any, last: Any) -> None:
        """A histogram in RAM: entry ``at`` of the running frame counts one when ``hit``."""
        w, written = self._ram(m, name, half, last, hit, at)
        r = m.submodules[f"ram_{name}"].read_port(domain="comb")
        m.d.comb += r.addr.eq(w.addr)
        m.d.comb += w.data.eq(Mux(written, r.data, 0) + 1)

    def _profile(self, m: Module, last: Any, half: Any) -> None:
        """Items in and out per sub-window: the running window's counts, written to its entry
        as it (or the frame) ends."""
        k = self.profile_bins
        cw = self.count_width
        at = Signal(ENTRY_BITS, name="window_at")
        ends = last | self.window_end
        for strobe, name in ((self.put, "profile_in"), (self.get, "profile_out")):
            cur = Signal(cw, name=f"window_{name}")
            now = Signal(cw, name=f"window_now_{name}")
            m.d.comb += now.eq(cur + strobe)
            w, _ = self._ram(m, name, half, last, ends & (now != 0), at)
            m.d.comb += w.data.eq(now)
            m.d.sync += cur.eq(Mux(ends, 0, now))
        with m.If(last):
            m.d.sync += at.eq(0)
        with m.Elif(self.window_end & (at != k - 1)):
            m.d.sync += at.eq(at + 1)
