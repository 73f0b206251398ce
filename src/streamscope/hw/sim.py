"""A host's side of the register bus in Amaranth's simulator: the simulated link over which the
tests (and a simulated device) read and write a ``RegisterBank`` exactly as a host reads real
hardware.

In: a running simulation's testbench context and a bank. Out: ``read``/``write`` of one word,
and of a whole register by name (low word first, as the map says); each read takes a cycle
(the word comes with the clock edge after the request), each write one.
"""

from __future__ import annotations

from typing import Any

from streamscope.hw.regmap import Register, RegisterBank


class SimBus:
    """The bus of ``bank`` driven from a testbench (``ctx``: Amaranth's testbench context)."""

    def __init__(self, ctx: Any, bank: RegisterBank) -> None:
        self.ctx = ctx
        self.bank = bank
        self.by_name: dict[str, Register] = {r.name: r for r in bank.registers}

    async def read(self, addr: int) -> int:
        ctx, b = self.ctx, self.bank
        ctx.set(b.addr, addr)
        ctx.set(b.r_en, 1)
        await ctx.tick()
        ctx.set(b.r_en, 0)
        return int(ctx.get(b.r_data))

    async def write(self, addr: int, value: int) -> None:
        ctx, b = self.ctx, self.bank
        ctx.set(b.addr, addr)
        ctx.set(b.w_data, value & 0xFFFFFFFF)
        ctx.set(b.w_en, 1)
        await ctx.tick()
        ctx.set(b.w_en, 0)

    def register(self, name: str) -> Register:
        reg = self.by_name.get(name)
        if reg is None:
            raise KeyError(f"no register {name!r}; the map has {', '.join(self.by_name)}")
        return reg

    async def get(self, name: str) -> int:
        """A whole register, low word first (the bank latches the rest as the first is read)."""
        reg = self.register(name)
        value = 0
        for w in range(reg.words):
            value |= await self.read(reg.addr + w) << (32 * w)
        return value

    async def set(self, name: str, value: int) -> None:
        reg = self.register(name)
        for w in range(reg.words):
            await self.write(reg.addr + w, value >> (32 * w))
