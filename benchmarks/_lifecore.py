"""DeVille, Troxel & George's (2005) Game of Life as an FPGA application, with and without its probes: the design whose
cost the probes add to (Curreri et al.'s (2010) Table 1 measures its monitor inside a whole design).

``LifeApp``: a ``width`` x ``height`` universe in two block RAMs (one generation read, the next
written), a row engine that computes one row of the next generation per cycle from the rows
above, at and below it (cells outside the universe are dead), and the population of each
generation out. ``MonitoredLife``: the same with ``probes`` probes, one per band of columns,
each sampling its band of a new row when any of its cells changed (the example's event-driven
sampling, ``examples/life.py``), into the central storage core behind its register bank.
"""

from __future__ import annotations

import random
from typing import Any

from amaranth.hdl import Cat, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from streamscope.hw.regmap import RegisterBank
from streamscope.hw.storage import CentralStorageCore


def initial(width: int, height: int, seed: int = 1) -> list[int]:
    """Generation 0: about a third of the cells alive, at random (a row is an int, bit 0 the
    left column)."""
    rng = random.Random(seed)
    return [sum(1 << c for c in range(width) if rng.random() < 1 / 3) for _ in range(height)]


class LifeApp(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """See the module. ``population``: live cells of the last generation completed; ``row``,
    ``new`` and ``old``: the row the engine finished this cycle, as it is and as it was (the
    probes' view), ``wrote`` when it did."""

    def __init__(self, width: int = 64, height: int = 40) -> None:
        self.width, self.height = width, height
        super().__init__({"population": Out(16), "row": Out(range(height + 3)), "new": Out(width),
                          "old": Out(width), "wrote": Out(1)})  # fmt: skip

    def elaborate(self, platform: object) -> Module:
        m = Module()
        w, h = self.width, self.height
        mems = []
        for k in range(2):
            mem = Memory(shape=w, depth=h, init=initial(w, h) if k == 0 else [])
            m.submodules[f"gen{k}"] = mem
            mems.append((mem.read_port(), mem.write_port()))
        side = Signal()  # which memory holds the generation being read
        # The row whose read is asked this cycle (rows h .. h + 2: past the bottom edge); the
        # memories answer the cycle after.
        step = Signal(range(h + 3))
        above, cur, below = Signal(w), Signal(w), Signal(w)
        read = Signal(w)
        for k, (rp, _) in enumerate(mems):
            m.d.comb += rp.addr.eq(step)
            with m.If(side == k):
                m.d.comb += read.eq(rp.data)
        # The rows shift down one a cycle: row step - 1 (read the cycle before) enters at the
        # bottom, so ``cur`` is row step - 3 with its neighbours around it.
        fresh = Signal(w)
        m.d.comb += fresh.eq(read)
        with m.If((step == 0) | (step >= h + 1)):
            m.d.comb += fresh.eq(0)  # above the top edge or below the bottom one: dead
        m.d.sync += [above.eq(cur), cur.eq(below), below.eq(fresh)]
        # The next state of ``cur``, every cell at once.
        nxt = Signal(w)
        for c in range(w):
            cells = [row[c + d] for row in (above, cur, below) for d in (-1, 0, 1)
                     if 0 <= c + d < w and not (row is cur and d == 0)]  # fmt: skip
            n = Signal(4, name=f"n{c}")
            m.d.comb += n.eq(sum(cells))
            m.d.comb += nxt[c].eq((n == 3) | (cur[c] & (n == 2)))
        row = Signal(range(h + 3))
        m.d.comb += row.eq(step - 3)
        valid = Signal()
        m.d.comb += valid.eq(step >= 3)
        count = Signal(16)
        ones = Signal(range(w + 1))
        m.d.comb += ones.eq(sum(nxt[c] for c in range(w)))
        for k, (_, wp) in enumerate(mems):
            m.d.comb += [wp.addr.eq(row), wp.data.eq(nxt), wp.en.eq(valid & (side != k))]
        m.d.comb += [self.row.eq(row), self.new.eq(nxt), self.old.eq(cur), self.wrote.eq(valid)]
        with m.If(step == h + 2):  # the last row: the generation is complete
            m.d.sync += [step.eq(0), side.eq(~side), count.eq(0), self.population.eq(count + ones)]
        with m.Else():
            m.d.sync += step.eq(step + 1)
            with m.If(valid):
                m.d.sync += count.eq(count + ones)
        return m


class MonitoredLife(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """``LifeApp`` with ``probes`` band probes sampling into central storage behind its bank."""

    def __init__(self, width: int = 64, height: int = 40, probes: int = 8, capacity: int = 512,
                 ports: int = 2) -> None:  # fmt: skip
        self.app = LifeApp(width, height)
        self.probes = probes
        band = width // probes
        self.storage = CentralStorageCore(probes, band, 32, capacity, ports, 1, 32)
        self.bank = RegisterBank(self.storage, self.storage.EVENTS)
        self.band = band
        members: dict[str, Any] = {"population": Out(16), "addr": In(12), "r_en": In(1),
                                   "r_data": Out(32), "w_en": In(1), "w_data": In(32)}  # fmt: skip
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.app = app = self.app
        m.submodules.bank = bank = self.bank
        m.d.comb += self.population.eq(app.population)
        for name in ("addr", "r_en", "w_en", "w_data"):
            m.d.comb += getattr(bank, name).eq(getattr(self, name))
        m.d.comb += self.r_data.eq(bank.r_data)
        b = self.band
        for k in range(self.probes):
            new, old = app.new[k * b : (k + 1) * b], app.old[k * b : (k + 1) * b]
            m.d.comb += [bank.offer[k].eq(app.wrote & (new != old)), bank.value[k].eq(Cat(new))]
        return m
