"""One register map and readout protocol for every probe core.

In: a core (an Amaranth component) and which of its inputs the design drives each cycle (its
``EVENTS``: strobes, values, states); every other input is configuration the host writes, every
output a register the host reads. Out: the map (``register_map``: each register's word address,
words and access), and ``RegisterBank``, the core behind a 32-bit register bus that any link can
carry: ``addr``, ``r_en`` (the word is in ``r_data`` the cycle after), ``w_en`` with ``w_data``.

Layout: registers in the order of the core's ports (arrays element by element), each taking
``ceil(width / 32)`` consecutive words, least significant word first, from address 0; word
``MAGIC_ADDR`` (the last address of the space) reads ``MAGIC`` and a register outside the map
reads 0, so a host can find a bank and tell a stale address. A write to a read-only register is
ignored. A multi-word counter is read low word first: reading the low word latches the high words
of the same register, so a value read across two reads is one value (``r_data`` of the high
words comes from the latch). A core's ``STROBES`` (a storage's ``pop``) are pulses: a write
of 1 drives one in the cycle of the write, so a read after it sees its effect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from amaranth.hdl import Module, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from streamscope.hw.link import ADDR_BITS, MAGIC

MAGIC_ADDR = (1 << ADDR_BITS) - 1


@dataclass(frozen=True, slots=True)
class Register:
    """One register: ``name`` (``mask[1]`` for an array's element), its first word, its words,
    its width in bits, ``rw`` (the host writes it) or ``ro``."""

    name: str
    addr: int
    words: int
    width: int
    access: str


def _ports(core: Any, events: frozenset[str]) -> list[tuple[str, Any, str]]:
    """(register name, the core's signal, access) in port order."""
    out = []
    for name, member in core.signature.members.items():
        if name in events:
            continue
        access = "rw" if member.flow == In else "ro"
        port = getattr(core, name)
        if member.dimensions:
            (n,) = member.dimensions
            out += [(f"{name}[{i}]", port[i], access) for i in range(n)]
        else:
            out.append((name, port, access))
    return out


def register_map(core: Any, events: frozenset[str]) -> list[Register]:
    """The registers of ``core`` (``events``: the inputs the design drives, not registers)."""
    regs, addr = [], 0
    for name, sig, access in _ports(core, events):
        width = len(sig)
        words = (width + 31) // 32
        regs.append(Register(name, addr, words, width, access))
        addr += words
    if addr >= MAGIC_ADDR:
        raise ValueError(f"{addr} words do not fit a bank's {MAGIC_ADDR} addresses")
    return regs


class RegisterBank(wiring.Component):  # type: ignore[misc]  # (amaranth is untyped)
    """``core`` behind the register bus; its ``events`` inputs stay ports of the bank (same
    names), driven by the design."""

    def __init__(self, core: Any, events: frozenset[str]) -> None:
        self.core = core
        self.events = events
        self.registers = register_map(core, events)
        members = {
            "addr": In(ADDR_BITS),
            "r_en": In(1),
            "r_data": Out(32),
            "w_en": In(1),
            "w_data": In(32),
        }
        for name in sorted(events):  # (a set's order changes from process to process)
            members[name] = core.signature.members[name]
        super().__init__(members)

    def elaborate(self, platform: object) -> Module:
        m = Module()
        m.submodules.core = self.core
        for name in sorted(self.events):
            inner, outer = getattr(self.core, name), getattr(self, name)
            if isinstance(inner, Signal):
                m.d.comb += inner.eq(outer)
            else:  # an array of ports
                m.d.comb += [a.eq(b) for a, b in zip(inner, outer, strict=True)]
        strobes: frozenset[str] = getattr(self.core, "STROBES", frozenset())
        sources = []
        for reg, (_, sig, access) in zip(
            self.registers, _ports(self.core, self.events), strict=True
        ):
            if access == "rw" and reg.name.split("[")[0] in strobes:
                # A pulse, in the cycle of the write itself: a read after it sees its effect.
                m.d.comb += sig.eq(self.w_en & (self.addr == reg.addr) & self.w_data[0])
                sources.append(sig)
            elif access == "rw":  # the host's copy drives the core's input
                store = Signal(reg.width, name="reg_" + reg.name.replace("[", "_").strip("]"))
                m.d.comb += sig.eq(store)
                with m.If(self.w_en):
                    for w in range(reg.words):
                        with m.If(self.addr == reg.addr + w):
                            hi = min(32 * (w + 1), reg.width)
                            m.d.sync += store[32 * w : hi].eq(self.w_data[: hi - 32 * w])
                sources.append(store)
            else:
                sources.append(sig)
        latch = Signal(32 * max((r.words for r in self.registers), default=1))
        with m.If(self.r_en), m.Switch(self.addr):
            for reg, source in zip(self.registers, sources, strict=True):
                for w in range(reg.words):
                    with m.Case(reg.addr + w):
                        if w == 0:
                            m.d.sync += self.r_data.eq(source[:32])
                            if reg.words > 1:
                                m.d.sync += latch.eq(source)
                        else:
                            m.d.sync += self.r_data.eq(latch[32 * w : 32 * (w + 1)])
            with m.Case(MAGIC_ADDR):
                m.d.sync += self.r_data.eq(MAGIC)
            with m.Default():
                m.d.sync += self.r_data.eq(0)
        return m
