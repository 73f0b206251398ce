"""The twin's stage state tracker (see ``_native.StateTracker``) and the one bound to each thread.

In: a stage's state changes and heartbeats. Out: one STATE record per change into the tracker's
ring (and a BUSY restated at most every ``HEARTBEAT_NS``); the thread's tracker for the FIFO.
"""

from __future__ import annotations

import threading
import time

from streamscope.core._twin_ring import Ring
from streamscope.core.records import State

#: See ``HEARTBEAT_NS`` in ``_native_state.c``: a busy stage restates BUSY at most this often (ns).
HEARTBEAT_NS = 100_000_000
_BUSY = int(State.BUSY)


class StateTracker:
    """See ``_native.StateTracker``."""

    __slots__ = ("beat_ns", "name", "ring", "state")

    def __init__(self, name: str, ring: Ring | None = None) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        if ring is not None and not isinstance(ring, Ring):
            raise TypeError("ring must be a Ring or None")
        self.name = name
        self.ring = ring
        self.state = 0
        self.beat_ns = 0

    def heartbeat(self) -> None:
        """See ``_native.StateTracker.heartbeat``."""
        ring = self.ring
        if ring is None or self.state != _BUSY:
            return
        now = time.monotonic_ns()
        if now - self.beat_ns >= HEARTBEAT_NS:
            self.beat_ns = now
            ring.record(_BUSY)

    def set(self, state: int) -> int:
        prev = self.state
        if state != prev:
            self.state = state
            ring = self.ring
            if ring is not None:
                ring.record(state)
        return prev


#: Each thread's current state tracker, as the C core keeps it thread-local: per thread of
#: the process.
_local = threading.local()


def bind_tracker(tracker: StateTracker | None) -> StateTracker | None:
    if tracker is not None and not isinstance(tracker, StateTracker):
        raise TypeError("bind_tracker(StateTracker or None)")
    old: StateTracker | None = getattr(_local, "tracker", None)
    _local.tracker = tracker
    return old


def bound_tracker() -> StateTracker | None:
    return getattr(_local, "tracker", None)
