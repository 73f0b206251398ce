"""The probe core this process uses: the native extension, or its pure-Python twin.

In: nothing (the choice is made once, at import). Out: ``Clock``, ``Ring``, ``StateTracker``,
``Fifo``, ``StackSampler``, ``astir``, ``bind_tracker``, ``bound_tracker``, ``current_tag``, ``set_current_tag``,
``emit_tag``, ``take_tag``, ``host_ns``, ``load_acquire``,
``store_release``, ``clock_gap_ns`` and the ring reader's ``guard_mapping``, ``unguard_mapping`` and
``mapping_faulted`` from one implementation, named by ``IMPLEMENTATION`` (``"native"`` or
``"python"``). The twin is used when the extension was not built (no compiler at install) or
when ``STREAMSCOPE_PURE_PYTHON`` is set (see ``core.config``).
"""

from __future__ import annotations

import queue
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from streamscope.core.config import PURE_PYTHON
from streamscope.core.stream import EOS, Aborted


def _load() -> tuple[ModuleType, str]:
    if not PURE_PYTHON:
        try:
            from streamscope.core import _native  # type: ignore[attr-defined,unused-ignore]
        except ImportError:
            pass
        else:
            return _native, "native"
    return twin(), "python"


def configure(impl: ModuleType) -> None:
    """Tell an implementation what its FIFO needs (both are configured alike)."""
    main = threading.main_thread().ident or 0
    impl.configure(eos=EOS, aborted=Aborted, full=queue.Full, empty=queue.Empty, main_ident=main)


def twin() -> ModuleType:
    """The pure-Python twin, configured: loaded only where it is wanted (no native core, a
    channel written in Python, a test of both), as it is some 10 ms of every process's start."""
    from streamscope.core import _twin

    if not getattr(_twin, "configured", False):
        configure(_twin)
        _twin.configured = True  # type: ignore[attr-defined]
    return _twin


def __getattr__(name: str) -> Any:
    """``TagSampler``: a path's origin's sampler of new tags, for a channel written in Python
    (the twin's: the native FIFO has its own inside); ``StackSampler`` where the native core
    has none (the twin's)."""
    if name in ("TagSampler", "StackSampler"):
        return getattr(twin(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_impl, IMPLEMENTATION = _load()
configure(_impl)

if TYPE_CHECKING:  # the twin is the typed reference: both have the same API
    from streamscope.core._twin import (
        Clock,
        Fifo,
        Ring,
        StackSampler,
        StateTracker,
        TagSampler,
        astir,
        bind_tracker,
        bound_tracker,
        clock_gap_ns,
        current_tag,
        emit_tag,
        guard_mapping,
        host_ns,
        load_acquire,
        mapping_faulted,
        set_current_tag,
        store_release,
        take_tag,
        unguard_mapping,
    )
else:
    Clock = _impl.Clock
    Ring = _impl.Ring
    StateTracker = _impl.StateTracker
    #: The native core has one where it can read this interpreter's frames (3.11's layout);
    #: elsewhere the twin's (``__getattr__``).
    if hasattr(_impl, "StackSampler"):
        StackSampler = _impl.StackSampler
    Fifo = _impl.Fifo
    bind_tracker = _impl.bind_tracker
    bound_tracker = _impl.bound_tracker
    host_ns = _impl.host_ns
    load_acquire = _impl.load_acquire
    astir = _impl.astir
    guard_mapping = _impl.guard_mapping
    unguard_mapping = _impl.unguard_mapping
    mapping_faulted = _impl.mapping_faulted
    store_release = _impl.store_release
    clock_gap_ns = _impl.clock_gap_ns
    current_tag = _impl.current_tag
    set_current_tag = _impl.set_current_tag
    emit_tag = _impl.emit_tag
    take_tag = _impl.take_tag


def implementations() -> dict[str, ModuleType]:
    """Every implementation this process can load, by name (the tests run them side by side)."""
    out: dict[str, ModuleType] = {"python": twin()}
    try:
        from streamscope.core import _native  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        return out
    out["native"] = _native
    return out


__all__ = [
    "IMPLEMENTATION",
    "Clock",
    "Fifo",
    "Ring",
    "StackSampler",
    "StateTracker",
    "TagSampler",
    "astir",
    "bind_tracker",
    "bound_tracker",
    "clock_gap_ns",
    "current_tag",
    "emit_tag",
    "guard_mapping",
    "host_ns",
    "implementations",
    "load_acquire",
    "mapping_faulted",
    "set_current_tag",
    "store_release",
    "take_tag",
    "unguard_mapping",
]
