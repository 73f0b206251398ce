"""How a host reaches probe cores: any link that reads and writes 32-bit words.

In: a ``RegisterLink`` (a user's own, over PCIe, a UART, an AXI bridge...; or ``hw.simlink``'s
simulated one) and the register map of each bank on it. Out: ``Registers``, one bank's registers
by name, whole (wide ones low word first, as the map says).

Banks share one address space: bank ``k`` answers at ``k * BANK_SPAN`` (its 12-bit addresses
above that), so a design with several cores decodes the bits above the twelfth to pick one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from streamscope.core.errors import ConfigError

#: The bits of a word address within a bank.
ADDR_BITS = 12
#: Word addresses each bank takes.
BANK_SPAN = 1 << ADDR_BITS
#: What the last word of a bank (``BANK_SPAN - 1``) reads: "SSRB".
MAGIC = 0x53535242


@runtime_checkable
class RegisterLink(Protocol):
    """A host's link to the banks of probe cores: one 32-bit word read or written at a word
    address. Reads and writes happen in the order they are called; a write has acted when it
    returns (a read after it sees its effect)."""

    def read(self, addr: int) -> int: ...

    def write(self, addr: int, value: int) -> None: ...


class RegisterInfo(Protocol):
    """A register of a map (``hw.regmap.Register``)."""

    @property
    def name(self) -> str: ...

    @property
    def addr(self) -> int: ...

    @property
    def words(self) -> int: ...

    @property
    def access(self) -> str: ...


class Registers:
    """One bank's registers over ``link``, by name; ``base``: the bank's first address. Checks
    the magic word first, so a link pointed at the wrong place fails at once."""

    def __init__(
        self, link: RegisterLink, registers: Sequence[RegisterInfo], base: int = 0
    ) -> None:
        self.link = link
        self.base = base
        self.by_name = {r.name: r for r in registers}
        got = link.read(base + BANK_SPAN - 1)
        if got != MAGIC:
            raise ConfigError(
                f"no probe core bank at word {base:#x}: its last word reads {got:#010x}, "
                f"not {MAGIC:#010x}"
            )

    def register(self, name: str) -> RegisterInfo:
        reg = self.by_name.get(name)
        if reg is None:
            raise KeyError(f"no register {name!r}; the bank has {', '.join(self.by_name)}")
        return reg

    def get(self, name: str) -> int:
        """A whole register, low word first (the bank latches the others as it is read)."""
        reg = self.register(name)
        value = 0
        for w in range(reg.words):
            value |= self.link.read(self.base + reg.addr + w) << (32 * w)
        return value

    def set(self, name: str, value: int) -> None:
        reg = self.register(name)
        if reg.access != "rw":
            raise ConfigError(f"register {name!r} is read-only")
        for w in range(reg.words):
            self.link.write(self.base + reg.addr + w, (value >> (32 * w)) & 0xFFFFFFFF)
