"""The pure-Python twin of the native probe core (``_native.c`` and its parts): the same classes and functions.

In: the same calls. Out: the same records, refusals and counts in the same ring layout, so that a
ring written by either is drained alike. Used where no compiler built the native core (or with
``STREAMSCOPE_PURE_PYTHON=1``); the tests run both side by side on the same inputs. It is several
times slower per event; it is never the reason a figure differs. One module per role: clocks
(``_twin_clock``), the ring writer (``_twin_ring``), the state tracker (``_twin_state``) and the
FIFO (``_twin_fifo``), the stack sampler (``_twin_stacks``).
"""

from __future__ import annotations

from streamscope.core._twin_clock import Clock, clock_gap_ns, host_ns
from streamscope.core._twin_fifo import (
    Fifo,
    TagSampler,
    configure,
    current_tag,
    emit_tag,
    set_current_tag,
    take_tag,
)
from streamscope.core._twin_ring import (
    Ring,
    astir,
    guard_mapping,
    load_acquire,
    mapping_faulted,
    store_release,
    unguard_mapping,
)
from streamscope.core._twin_stacks import StackSampler
from streamscope.core._twin_state import (
    HEARTBEAT_NS,
    StateTracker,
    bind_tracker,
    bound_tracker,
    service_spacing_ns,
)

__all__ = [
    "HEARTBEAT_NS",
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
    "configure",
    "current_tag",
    "emit_tag",
    "guard_mapping",
    "host_ns",
    "load_acquire",
    "mapping_faulted",
    "service_spacing_ns",
    "set_current_tag",
    "store_release",
    "take_tag",
    "unguard_mapping",
]
