"""Libraries that wait for their workers their own way: those waits are waits, not work.

In: the modules of ``POLLING``, whenever the program imports them while ``install`` is in
force. Out: asyncio patched (``aio``); their waits made with the calling worker blocked in. joblib's ``Parallel`` takes
its workers' results by looking at its jobs every 10 ms and sleeping between looks (every
``time.sleep`` of ``joblib.parallel``); mpire's ``map`` and ``imap`` wait on a condition of
their results' iterator (``mpire.async_result``) that its results thread notifies: the thread
that runs them (a program's main thread) waits for its workers there, and would otherwise read
busy all along, so that it, not the workers, looked like the stage that limits the program.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
import time
import types
from collections.abc import Sequence
from typing import Any

from streamscope.core.records import State
from streamscope.pipeline.program.auto import executors
from streamscope.pipeline.program.auto.mpqueue import LOKY, loky_queues
from streamscope.pipeline.program.auto.patches import Patches
from streamscope.pipeline.program.auto.waits import waiting


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


def _sleeps(module: types.ModuleType) -> Patches:
    """Every ``time.sleep`` of the module a wait (its ``time`` the one above)."""
    return Patches({(module, "time"): lambda standard: _TIME if standard is time else standard})


def _blocked_unless(ready: str | None) -> Any:
    """A method that waits for results, the calling worker blocked in while it does, unless
    its object's ``ready`` (an attribute, or a method called) says it has some already."""

    def wrap(fn: Any) -> Any:
        @functools.wraps(fn)
        def call(self: Any, *args: Any, **kwargs: Any) -> Any:
            now = getattr(self, ready) if ready else None
            if now() if callable(now) else now:
                return fn(self, *args, **kwargs)
            with waiting(State.BLOCKED_IN):
                return fn(self, *args, **kwargs)

        return call

    return wrap


def _mpire_results(module: types.ModuleType) -> Patches:
    """mpire's results' waits: ``next`` of an ``imap``'s (``map`` takes them from it) unless
    one is there, its ``wait`` for all; ``wait`` and ``get`` of an ``apply_async``'s unless it
    is ready."""
    items, done = _blocked_unless("_items"), _blocked_unless("ready")
    unordered, single = module.UnorderedAsyncResultIterator, module.AsyncResult
    return Patches({
        (unordered, "next"): items, (unordered, "__next__"): items,
        (unordered, "wait"): _blocked_unless(None),
        (single, "wait"): done, (single, "get"): done,
    })  # fmt: skip


def _asyncio(module: types.ModuleType) -> Patches:
    from streamscope.pipeline.program.auto import aio

    return aio.patches(module)


def _managers(module: types.ModuleType) -> Patches:
    from streamscope.pipeline.program.auto import managed

    return managed.patches(module)


def _connections(module: types.ModuleType) -> Patches:
    from streamscope.pipeline.program.auto import pipes

    return pipes.patches(module)


def _streamz(module: types.ModuleType) -> Patches:
    from streamscope.pipeline.program.auto import streams

    return streams.stream_nodes(module)


#: Modules patched as the program imports them: asyncio (``aio``: loaded only then), those
#: whose waits for the library's workers are watched, the standard library's process
#: executor and loky's, and loky's queues (``auto.executors``, ``auto.mpqueue``).
POLLING = {
    "asyncio": _asyncio,
    "joblib.parallel": _sleeps,
    "mpire.async_result": _mpire_results,
    "streamz.core": _streamz,
    "multiprocessing.managers": _managers,
    "multiprocessing.connection": _connections,
    "concurrent.futures.process": executors.process_executor,
    **{f"{m}.process_executor": executors.process_executor for m in LOKY},
    **{f"{m}.backend.queues": loky_queues for m in LOKY},
}
#: The patches of each of them imported while installed: process-wide, as the patched modules
#: are.
_applied: dict[str, Patches] = {}


def _patch(module: types.ModuleType) -> None:
    if module.__name__ not in _applied:
        patches = _applied[module.__name__] = POLLING[module.__name__](module)
        patches.apply()


def _unpatch(name: str) -> None:
    patches = _applied.pop(name, None)
    if patches is not None:
        patches.undo()


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
    for name in list(_applied):
        _unpatch(name)


__all__ = ["POLLING", "install", "uninstall"]
