"""The host's side of probe cores on an FPGA, over any link: the adapter a board needs, and the
readers that use it.

    python examples/fpga_link.py [--cycles N] [--seed S]

A design instantiates ``ss_central_bank`` (``streamscope hw verilog central -p probes=4 --bank``)
and drives each probe's ``offer``/``value`` ports; the host reaches the bank's 32-bit register
bus over its own link (a UART or PCIe bridge, an AXI-lite window of ``/dev/mem``...). All
streamscope asks of that link is ``hw.link.RegisterLink``: ``read(addr)`` and ``write(addr,
value)`` of one word. ``MyBoardLink`` below is the shape of one; this example runs against the
in-memory one, ``hw.sim.SimulatedLink``, the bank simulated cycle by cycle, with the design's
offers played into it as the board's logic would make them. It prints what the host read: each
probe's samples, its counts (written, contention and overflow drops, from the core's own
registers) and two calibration readings of a timestamp core beside it.
"""

from __future__ import annotations

import argparse
import random

from streamscope.hw.link import BANK_SPAN, RegisterLink, Registers
from streamscope.hw.reader import StorageReader, TimestampReader
from streamscope.hw.regmap import RegisterBank
from streamscope.hw.sim import SimulatedLink
from streamscope.hw.storage import CentralStorageCore
from streamscope.hw.timestamp import Timestamp


class MyBoardLink:
    """The shape of a real board's link (not used here): a memory-mapped window of the bank,
    for example, one 32-bit word per address."""

    def __init__(self, window: memoryview) -> None:
        self.words = window.cast("I")

    def read(self, addr: int) -> int:
        return int(self.words[addr])

    def write(self, addr: int, value: int) -> None:
        self.words[addr] = value & 0xFFFFFFFF


def host_reads(link: RegisterLink, storage: RegisterBank, clock: RegisterBank) -> None:
    """What a host does, whatever carries its reads: the storage bank at word 0, the timestamp
    bank at the next bank's place (``BANK_SPAN``)."""
    probes = storage.core.probes
    reader = StorageReader(Registers(link, storage.registers), "central", probes, 16)
    samples = reader.samples()
    for i, drops in enumerate(reader.drops()):
        mine = [(stamp, value) for p, stamp, value in samples if p == i]
        print(f"probe {i}: {len(mine)} samples read (first {mine[:2]}), written "
              f"{drops.written}, contention drops {drops.contention}, overflow {drops.overflow}")  # fmt: skip
    ts = TimestampReader(Registers(link, clock.registers, base=BANK_SPAN))
    first, second = ts.now(), ts.now()
    print(f"timestamp core: {first}, then {second} cycles")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--cycles", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args(argv)
    core = CentralStorageCore(probes=4, value_width=16, capacity=256, ports=1)
    storage = RegisterBank(core, core.EVENTS)
    tick = Timestamp()
    clock = RegisterBank(tick, tick.EVENTS)
    board = SimulatedLink([storage, clock])  # the in-memory RegisterLink
    rng = random.Random(a.seed)
    # The board's own logic: now and then a probe offers a sample (here, played cycle by cycle).
    board.play([
        [x for i in range(4) if rng.random() < 0.2
         for x in ((storage.offer[i], 1), (storage.value[i], rng.randrange(1 << 16)))]
        for _ in range(a.cycles)
    ])  # fmt: skip
    host_reads(board, storage, clock)
    board.close()


if __name__ == "__main__":
    main()
