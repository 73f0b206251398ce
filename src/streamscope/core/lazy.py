"""Names a package exports, imported when first used (PEP 562), so that importing the package
costs nothing until they are.

In: a package's globals and its exports (name -> "module:attribute"). Out: the ``__getattr__``
and ``__dir__`` the package defines from them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(
    namespace: dict[str, Any], exports: dict[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for a package whose ``exports`` map each public name to
    ``"module:attribute"``; a name, once imported, is kept in ``namespace``."""
    package = namespace["__name__"]

    def getattr_(name: str) -> Any:
        found = exports.get(name)
        if found is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, _, attr = found.partition(":")
        value = getattr(importlib.import_module(module), attr)
        namespace[name] = value
        return value

    def dir_() -> list[str]:
        return sorted(namespace.get("__all__") or {*namespace, *exports})

    return getattr_, dir_
