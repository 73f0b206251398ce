"""Where probe cores keep their samples (DeVille, Troxel & George, Performance Monitoring for
Run-time Management of Reconfigurable Devices, 2005, §3.2 and §5.2), as cores: one buffer shared
by every probe behind a round-robin arbiter, or one buffer per probe.

In (each cycle): ``offer[i]`` with ``value[i]`` from each of ``probes`` probes (a sample taken
this cycle; its time is the cycle counter ``now``); ``pop`` (the host takes the oldest sample).
Out: the oldest sample (``head_probe``, ``head_ticks``, ``head_value``; ``level`` samples held),
and per probe the samples ``written``, refused for ``contention`` (its hold register was still
waiting for the arbiter: centralised only) and for ``overflow`` (the buffer was full).

Centralised: each cycle the arbiter first grants up to ``ports`` held samples, one per probe,
visiting probes round-robin from the one after the last granted; a granted sample is written
if the buffer has room, else counted an overflow. Then the samples offered this cycle enter
their probe's hold register of ``hold`` places, or are refused (contention). Distributed: a
sample is written the cycle it is offered, into its probe's own buffer, unless that is full.
The semantics are ``probes.storage``'s ``CentralStorage`` and ``DistributedStorage``;
``tests/property/test_hw_storage.py`` holds them to each other sample by sample.

``run_input=1`` (for simulation) adds a ``run`` input: a cycle with ``run`` low is no cycle of
the design (nothing is granted, written, offered or counted, ``now`` stands still) and only the
host's ``pop`` acts, so that a simulated host can read the buffer between two design cycles as
a real one reads it beside the design. Without it the core always runs.
"""

from __future__ import annotations

from amaranth.hdl import Array, Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


def _bits(n: int) -> int:
    return max(1, n.bit_length())


def _check(probes: int, capacity: int) -> None:
    if probes < 1:
        raise ValueError("storage needs at least one probe")
    if capacity < 1 or capacity & (capacity - 1):
        raise ValueError(f"storage capacity must be a power of two, got {capacity}")


class _Storage(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """What both schemes share: each probe's offer and value in, the cycle counter, each
    probe's written/contention/overflow counters out."""

    #: The inputs the design drives each cycle; the others are registers the host writes.
    EVENTS = frozenset({"offer", "value"})
    #: Registers that act once per write (the host takes the oldest sample).
    STROBES = frozenset({"pop"})

    def __init__(
        self,
        probes: int,
        value_width: int,
        ticks_width: int,
        capacity: int,
        count_width: int,
        members: dict[str, object],
        run_input: int,
    ) -> None:
        _check(probes, capacity)
        self.probes, self.capacity = probes, capacity
        self.run_input = bool(run_input)
        if run_input:
            self.EVENTS = _Storage.EVENTS | {"run"}
            members = {"run": In(1), **members}
        self.value_width, self.ticks_width = value_width, ticks_width
        counters = {name: Out(count_width).array(probes)
                    for name in ("written", "contention", "overflow")}  # fmt: skip
        super().__init__({"offer": In(1).array(probes), "value": In(value_width).array(probes),
                          "now": Out(ticks_width), **members, **counters})  # fmt: skip

    def _running(self, m: Module) -> Signal:
        """High in the cycles that are the design's: always, or with ``run`` (see the module)."""
        run = Signal(name="running")
        m.d.comb += run.eq(self.run if self.run_input else 1)
        with m.If(run):
            m.d.sync += self.now.eq(self.now + 1)
        return run


class CentralStorageCore(_Storage):
    """See the module: one buffer of ``capacity`` samples, ``ports`` writes a cycle, a hold
    register of ``hold`` samples per probe."""

    def __init__(
        self,
        probes: int = 4,
        value_width: int = 16,
        ticks_width: int = 32,
        capacity: int = 16,
        ports: int = 1,
        hold: int = 1,
        count_width: int = 32,
        run_input: int = 0,
    ) -> None:
        if ports < 1 or hold < 1:
            raise ValueError("central storage needs a write port and a hold place at least")
        if ports & (ports - 1) or ports > capacity:
            raise ValueError(
                f"central storage's ports ({ports}) must be a power of two, at most its capacity "
                f"({capacity}): each port writes a memory of its own"
            )
        self.ports, self.hold = ports, hold
        super().__init__(
            probes, value_width, ticks_width, capacity, count_width,
            {"pop": In(1), "level": Out(_bits(capacity)), "head_probe": Out(_bits(probes - 1)),
             "head_ticks": Out(ticks_width), "head_value": Out(value_width)},
            run_input,
        )  # fmt: skip

    def elaborate(self, platform: object) -> Module:
        m = Module()
        n, cap, hold, nports = self.probes, self.capacity, self.hold, self.ports
        pbits = _bits(n - 1)
        tw, vw = self.ticks_width, self.value_width
        run = self._running(m)
        # Hold registers: per probe, ``hold`` places of (ticks, value), oldest first.
        ht = [[Signal(tw, name=f"ht{i}_{k}") for k in range(hold)] for i in range(n)]
        hv = [[Signal(vw, name=f"hv{i}_{k}") for k in range(hold)] for i in range(n)]
        hn = [Signal(_bits(hold), name=f"hn{i}") for i in range(n)]
        # The arbiter: from the probe after the last granted, up to ``ports`` grants.
        last = Signal(_bits(n - 1), init=n - 1)
        full = Array(hn[i] != 0 for i in range(n))
        granted = [Signal(name=f"granted{i}") for i in range(n)]
        slot = [Signal(_bits(nports), name=f"slot{i}") for i in range(n)]  # its grant's order
        count = Signal(_bits(nports))
        new_last = Signal.like(last)
        m.d.comb += new_last.eq(last)
        g = Signal(_bits(nports), name="g0")
        for r in range(n):
            idx = Signal.like(last, name=f"idx{r}")
            m.d.comb += idx.eq(Mux(last + 1 + r >= n, last + 1 + r - n, last + 1 + r))
            grant = Signal(name=f"grant{r}")
            m.d.comb += grant.eq(full[idx] & (g < nports) & run)
            nxt = Signal(_bits(nports), name=f"g{r + 1}")
            m.d.comb += nxt.eq(g + grant)
            for i in range(n):
                with m.If(grant & (idx == i)):
                    m.d.comb += [granted[i].eq(1), slot[i].eq(g)]
            with m.If(grant):
                m.d.comb += new_last.eq(idx)
            g = nxt
        m.d.comb += count.eq(g)
        m.d.sync += last.eq(new_last)
        room = Signal(_bits(cap))
        m.d.comb += room.eq(cap - self.level)
        for i in range(n):
            with m.If(granted[i] & (slot[i] < room)):
                m.d.sync += self.written[i].eq(self.written[i] + 1)
            with m.Elif(granted[i]):
                m.d.sync += self.overflow[i].eq(self.overflow[i] + 1)
        # Each write port takes its grant's sample (one multiplexer a port, not one a probe).
        slots = []
        for k in range(nports):
            word = Signal(pbits + tw + vw, name=f"word{k}")
            on = Signal(name=f"on{k}")
            for i in range(n):
                with m.If(granted[i] & (slot[i] == k)):
                    m.d.comb += [word.eq(Cat(hv[i][0], ht[i][0], Const(i, pbits))), on.eq(1)]
            slots.append((word, on & (k < room)))
        # The shared buffer: ``ports`` memories (block RAM, one write and one read port each),
        # place ``q`` in memory ``q % ports``, so that the grants of a cycle, written at
        # consecutive places, each find a memory of their own.
        rows = cap // nports
        wp = Signal(_bits(cap - 1) if cap > 1 else 1)
        rp = Signal.like(wp)
        popped = Signal()
        m.d.comb += popped.eq(self.pop & (self.level != 0))
        wrote = Signal(_bits(nports))
        m.d.comb += wrote.eq(Mux(count < room, count, room))
        rp_next = Signal.like(rp)
        m.d.comb += rp_next.eq(rp + popped if cap > 1 else 0)
        lane = max(1, (nports - 1).bit_length()) if nports > 1 else 0
        datas = []
        for b in range(nports):
            mem = Memory(shape=pbits + tw + vw, depth=max(rows, 1), init=[])
            m.submodules[f"buffer{b}"] = mem
            w = mem.write_port()
            r = mem.read_port(transparent_for=(w,))
            # The slot that writes memory b this cycle: the one whose place is b modulo ports.
            k_b = (b - wp) % nports if nports > 1 else 0
            for k, (word, on) in enumerate(slots):
                with m.If(k_b == k):
                    m.d.comb += [w.data.eq(word), w.en.eq(on)]
            row = (wp + k_b)[lane:] if nports > 1 else wp
            m.d.comb += w.addr.eq(row)
            # Read ahead: the head of the next cycle is at ``rp_next``.
            if nports > 1:
                ahead = Mux(rp_next[:lane] > b, 1, 0)
                m.d.comb += r.addr.eq(rp_next[lane:] + ahead)
            else:
                m.d.comb += r.addr.eq(rp_next)
            datas.append(r.data)
        head = Signal(pbits + tw + vw)
        m.d.comb += head.eq(Array(datas)[rp[:lane]] if nports > 1 else datas[0])
        m.d.comb += [self.head_value.eq(head[:vw]), self.head_ticks.eq(head[vw : vw + tw]),
                     self.head_probe.eq(head[vw + tw :])]  # fmt: skip
        if cap > 1:
            m.d.sync += [wp.eq(wp + wrote), rp.eq(rp_next)]
        m.d.sync += self.level.eq(self.level + wrote - popped)
        # The hold registers: the granted sample leaves, this cycle's sample enters or is refused.
        for i in range(n):
            after = Signal(_bits(hold), name=f"after{i}")
            m.d.comb += after.eq(hn[i] - granted[i])
            with m.If(granted[i]):
                for k in range(hold - 1):
                    m.d.sync += [ht[i][k].eq(ht[i][k + 1]), hv[i][k].eq(hv[i][k + 1])]
            with m.If(self.offer[i] & run):
                with m.If(after < hold):
                    for k in range(hold):
                        with m.If(after == k):
                            m.d.sync += [ht[i][k].eq(self.now), hv[i][k].eq(self.value[i])]
                    m.d.sync += hn[i].eq(after + 1)
                with m.Else():
                    m.d.sync += [hn[i].eq(after), self.contention[i].eq(self.contention[i] + 1)]
            with m.Else():
                m.d.sync += hn[i].eq(after)
        return m


class DistributedStorageCore(_Storage):
    """See the module: a buffer of ``capacity`` samples per probe, each read by ``pop[i]``."""

    def __init__(
        self,
        probes: int = 4,
        value_width: int = 16,
        ticks_width: int = 32,
        capacity: int = 16,
        count_width: int = 32,
        run_input: int = 0,
    ) -> None:
        super().__init__(
            probes, value_width, ticks_width, capacity, count_width,
            {"pop": In(1).array(probes), "level": Out(_bits(capacity)).array(probes),
             "head_ticks": Out(ticks_width).array(probes),
             "head_value": Out(value_width).array(probes)},
            run_input,
        )  # fmt: skip

    def elaborate(self, platform: object) -> Module:
        m = Module()
        cap = self.capacity
        tw, vw = self.ticks_width, self.value_width
        abits = max(1, (cap - 1).bit_length())
        run = self._running(m)
        for i in range(self.probes):
            # The probe's buffer: a memory (block RAM) with a write port and a read port.
            mem = Memory(shape=tw + vw, depth=cap, init=[])
            m.submodules[f"buffer{i}"] = mem
            w = mem.write_port()
            r = mem.read_port(transparent_for=(w,))
            wp = Signal(abits, name=f"wp{i}")
            rp = Signal(abits, name=f"rp{i}")
            popped = Signal(name=f"popped{i}")
            m.d.comb += popped.eq(self.pop[i] & (self.level[i] != 0))
            rp_next = Signal(abits, name=f"rp_next{i}")
            m.d.comb += rp_next.eq(rp + popped if cap > 1 else 0)
            m.d.comb += r.addr.eq(rp_next)
            m.d.comb += [self.head_value[i].eq(r.data[:vw]), self.head_ticks[i].eq(r.data[vw:])]
            wrote = Signal(name=f"wrote{i}")
            m.d.comb += wrote.eq(self.offer[i] & run & (self.level[i] < cap))
            m.d.comb += [w.addr.eq(wp), w.data.eq(Cat(self.value[i], self.now)), w.en.eq(wrote)]
            with m.If(wrote):
                m.d.sync += self.written[i].eq(self.written[i] + 1)
                if cap > 1:
                    m.d.sync += wp.eq(wp + 1)
            with m.Elif(self.offer[i] & run):
                m.d.sync += self.overflow[i].eq(self.overflow[i] + 1)
            if cap > 1:
                m.d.sync += rp.eq(rp_next)
            m.d.sync += self.level[i].eq(self.level[i] + wrote - popped)
        return m
