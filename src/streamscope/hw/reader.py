"""A host's side of the probe cores: what it reads from a storage or timestamp core's registers,
over any ``RegisterLink`` (a real board's, or ``hw.sim``'s simulated one).

In: a core's ``Registers`` (``hw.link``). Out: a storage's samples, oldest first, each as
(probe index, stamp, value), and its drop counts per probe; a timestamp core's answer to one
calibration request. The RTL device (``hw.rtl``) reads its simulated cores with these, as a host
reads real hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscope.hw.link import Registers


def signed(value: int, bits: int) -> int:
    """A register's ``bits``-bit two's complement value as a Python int."""
    return value - (1 << bits) if value >> (bits - 1) & 1 else value


@dataclass(frozen=True, slots=True)
class Drops:
    """One probe's counts so far: samples written, refused for contention (its hold register
    was full: centralised storage only) and for overflow (the buffer was full)."""

    written: int
    contention: int
    overflow: int


class StorageReader:
    """Empties a ``central`` or ``distributed`` storage core of ``probes`` probes; values are
    ``value_bits`` wide, signed."""

    def __init__(self, regs: Registers, scheme: str, probes: int, value_bits: int) -> None:
        if scheme not in ("central", "distributed"):
            raise ValueError(f"a storage core is 'central' or 'distributed', not {scheme!r}")
        self.regs, self.scheme, self.probes, self.bits = regs, scheme, probes, value_bits

    def samples(self) -> list[tuple[int, int, int]]:
        """Every sample the core holds, oldest first (per probe for a distributed core), each
        taken off the buffer with a write of ``pop``."""
        regs, out = self.regs, []
        if self.scheme == "central":
            for _ in range(regs.get("level")):
                probe = regs.get("head_probe")
                stamp = regs.get("head_ticks")
                out.append((probe, stamp, signed(regs.get("head_value"), self.bits)))
                regs.set("pop", 1)
            return out
        for i in range(self.probes):
            for _ in range(regs.get(f"level[{i}]")):
                stamp = regs.get(f"head_ticks[{i}]")
                out.append((i, stamp, signed(regs.get(f"head_value[{i}]"), self.bits)))
                regs.set(f"pop[{i}]", 1)
        return out

    def drops(self) -> list[Drops]:
        """Each probe's counts (running totals)."""
        regs = self.regs
        central = self.scheme == "central"
        return [
            Drops(regs.get(f"written[{i}]"), regs.get(f"contention[{i}]") if central else 0,
                  regs.get(f"overflow[{i}]"))
            for i in range(self.probes)
        ]  # fmt: skip


class TimestampReader:
    """Calibration readings of a timestamp core: each a request written, then its answer."""

    def __init__(self, regs: Registers) -> None:
        self.regs = regs

    def now(self) -> int:
        """The counter in the cycle the request reached the core."""
        self.regs.set("req", 1)
        return self.regs.get("stamp")
