"""The parts of streamscope a plain install leaves out, each brought by an extra of the package.

In: an optional module's name (``ray``, ``amaranth``, or one of theirs). Out: the module, imported;
where it is not installed, a ``MissingExtraError`` naming the extra that brings it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from streamscope.core.errors import MissingExtraError


@dataclass(frozen=True, slots=True)
class Extra:
    """An extra of the package (``pip install 'streamscope[name]'``) and what needs it."""

    name: str
    needs: str  #: the part of streamscope that needs it, as the error says it


#: Each optional top-level module: the extra that installs it.
EXTRAS = {
    "ray": Extra("hosts", "hosts need Ray"),
    "amaranth": Extra("hw", "the FPGA probe cores need Amaranth"),
}


def require(module: str, needs: str = "") -> ModuleType:
    """``module`` (a key of ``EXTRAS`` or a module under one), imported; a
    ``MissingExtraError`` if it is not installed or cannot be imported, one line saying what
    needs it (``needs``, else its extra's own words) and which extra to install."""
    root = module.partition(".")[0]
    extra = EXTRAS[root]
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = (exc.name or "").partition(".")[0]
        # Installed but broken (one of its own requirements missing, a version that lacks a
        # name): say what failed, which reinstalling the extra is likely to mend.
        broken = "" if missing == root else f", which could not be imported ({exc})"
        raise MissingExtraError(
            f"{needs or extra.needs}{broken}: pip install 'streamscope[{extra.name}]'",
            extra=extra.name,
        ) from (exc if broken else None)
