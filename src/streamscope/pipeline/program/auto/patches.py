"""Standard library attributes replaced while a program is watched, and put back after.

In: a table of ``(owner, name) -> wrap``, each ``wrap`` taking the standard attribute and
giving the one to use instead. Out: ``Patches.apply`` (idempotent) and ``Patches.undo``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Wrap = Callable[[Any], Any]


class Patches:
    """One table of replacements: each attribute as the owner (a class or module) has it
    itself, or inherits it, replaced by what its ``wrap`` makes of it, until ``undo`` (which
    puts back what the owner had itself, and takes away what it inherited)."""

    def __init__(self, table: Mapping[tuple[Any, str], Wrap]) -> None:
        self.table = dict(table)
        #: What ``apply`` replaced, to put back (empty: not applied).
        self.saved: dict[tuple[Any, str], Any] = {}

    def apply(self) -> None:
        if self.saved:
            return
        for (owner, name), wrap in self.table.items():
            own = vars(owner).get(name, _INHERITED)
            self.saved[owner, name] = own
            setattr(owner, name, wrap(getattr(owner, name) if own is _INHERITED else own))

    def undo(self) -> None:
        for (owner, name), standard in self.saved.items():
            if standard is _INHERITED:
                delattr(owner, name)
            else:
                setattr(owner, name, standard)
        self.saved.clear()


#: What an owner that only inherits an attribute had of it itself.
_INHERITED = object()


__all__ = ["Patches", "Wrap"]
