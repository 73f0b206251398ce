"""Libraries that wait for their workers by polling: their sleeps are waits, not work.

In: the modules of ``POLLING``, whenever the program imports them while ``install`` is in
force. Out: their ``time.sleep`` calls made with the calling worker blocked in. joblib's
``Parallel`` takes its workers' results by looking at its jobs every 10 ms and sleeping
between looks (every ``time.sleep`` of ``joblib.parallel``): the thread that runs it (a
program's main thread) waits for its workers there, and would otherwise read busy all along, so
that it, not the workers, looked like the stage that limits the program.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import time
import types
from collections.abc import Sequence
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.program.auto.waits import waiting

#: Modules every sleep of which waits for the library's workers.
POLLING = ("joblib.parallel",)


def _waiting_sleep(seconds: float) -> None:
    with waiting(State.BLOCKED_IN):
        time.sleep(seconds)


class _Time(types.ModuleType):
    """``time`` as a polling module sees it: the standard module but for ``sleep``."""

    def __init__(self) -> None:
        super().__init__("time")
        self.sleep = _waiting_sleep

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


_TIME = _Time()


def _patch(module: types.ModuleType) -> None:
    if getattr(module, "time", None) is time:
        module.time = _TIME  # type: ignore[attr-defined]


def _unpatch(module: types.ModuleType) -> None:
    if getattr(module, "time", None) is _TIME:
        module.time = time  # type: ignore[attr-defined]


class _Loader(importlib.abc.Loader):
    """The module's own loader, its module patched once it has run."""

    def __init__(self, loader: Any) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        made: types.ModuleType | None = self.loader.create_module(spec)
        return made

    def exec_module(self, module: types.ModuleType) -> None:
        self.loader.exec_module(module)
        _patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds a module of ``POLLING`` as the other finders do, and loads it patched."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in POLLING:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_FINDER = _Finder()


def install() -> None:
    """Polling modules imported already are patched, and those imported later as they are."""
    for name in POLLING:
        module = sys.modules.get(name)
        if module is not None:
            _patch(module)
    if _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def uninstall() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    for name in POLLING:
        module = sys.modules.get(name)
        if module is not None:
            _unpatch(module)


__all__ = ["POLLING", "install", "uninstall"]
