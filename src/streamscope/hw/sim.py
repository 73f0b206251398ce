"""A host's side of the register bus in Amaranth's simulator: the simulated link over which the
tests (and a simulated device) read and write a ``RegisterBank`` exactly as a host reads real
hardware (``SimBus`` inside a testbench; ``SimulatedLink``, a ``RegisterLink`` any thread calls).

In: a running simulation's testbench context and a bank. Out: ``read``/``write`` of one word,
and of a whole register by name (low word first, as the map says); each read takes a cycle
(the word comes with the clock edge after the request), each write one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Sequence
from typing import Any

from amaranth.hdl import Module
from amaranth.sim import Simulator

from streamscope.hw.link import ADDR_BITS, BANK_SPAN
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


class SimulatedLink:
    """The in-memory ``RegisterLink`` (``hw.link``): banks simulated cycle by cycle in Amaranth's
    simulator, in a thread of its own, bank ``k`` at word ``k * BANK_SPAN``.

    The simulation runs only when asked: ``read`` and ``write`` take a cycle each (the design's
    inputs idle), ``play`` runs cycles with the design's inputs set as given (each row: the
    signals one cycle drives; an input not in a row is 0 that cycle). ``cycles`` counts the
    cycles run. Thread-safe: calls are served one at a time, in order.
    """

    def __init__(self, banks: Sequence[RegisterBank], *, period_s: float = 1e-8) -> None:
        top = Module()
        for k, bank in enumerate(banks):
            top.submodules[f"bank{k}"] = bank
        self.banks = list(banks)
        self.cycles = 0
        self._calls: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()
        self._answers: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        sim = Simulator(top)
        sim.add_clock(period_s)
        sim.add_testbench(self._serve)
        self._thread = threading.Thread(
            target=self._run, args=(sim,), name="streamscope-rtl-sim", daemon=True
        )
        self._thread.start()

    # The link (hw.link.RegisterLink).

    def read(self, addr: int) -> int:
        return int(self._call("read", addr))

    def write(self, addr: int, value: int) -> None:
        self._call("write", (addr, value))

    def play(self, rows: Sequence[Sequence[tuple[Any, int]]]) -> None:
        """Run ``len(rows)`` cycles, each with its (signal, value) pairs driven."""
        if rows:
            self._call("play", rows)

    def close(self) -> None:
        """End the simulation (and its thread). Safe to call twice."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._calls.put(("stop", None))
        self._thread.join(timeout=5.0)

    def _call(self, op: str, arg: Any) -> Any:
        with self._lock:
            if self._closed:
                raise RuntimeError("the simulated link is closed")
            self._calls.put((op, arg))
            got = self._answers.get()
        if isinstance(got, BaseException):
            raise got
        return got

    def _run(self, sim: Simulator) -> None:
        try:
            sim.run()
        except BaseException as exc:  # handed to the caller waiting for it
            self._answers.put(exc)

    async def _serve(self, ctx: Any) -> None:
        buses = [SimBus(ctx, bank) for bank in self.banks]
        while True:
            op, arg = self._calls.get()  # blocks the simulation until asked: no cycle runs
            if op == "stop":
                return
            try:
                if op == "play":
                    for row in arg:
                        for sig, value in row:
                            ctx.set(sig, value)
                        await ctx.tick()
                        for sig, _ in row:
                            ctx.set(sig, 0)
                    self.cycles += len(arg)
                    got: Any = None
                else:
                    addr = arg if op == "read" else arg[0]
                    bus = buses[addr >> ADDR_BITS] if addr >> ADDR_BITS < len(buses) else None
                    if bus is None:
                        got = 0 if op == "read" else None  # nothing there: reads 0
                    elif op == "read":
                        got = await bus.read(addr & (BANK_SPAN - 1))
                    else:
                        got = await bus.write(addr & (BANK_SPAN - 1), arg[1])
                    self.cycles += bus is not None
            except Exception as exc:  # handed to the caller
                got = exc
            self._answers.put(got)
