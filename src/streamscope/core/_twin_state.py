"""The twin's stage state tracker (see ``_native.StateTracker``) and the one bound to each thread.

In: a stage's state changes, heartbeats and item boundaries. Out: one STATE record per change
into the tracker's ring (and a BUSY restated at most every ``HEARTBEAT_NS``), the service time
of one item at most every ``service_spacing_ns()``; the thread's tracker for the FIFO.
"""

from __future__ import annotations

import threading
import time

from streamscope.core._twin_ring import Ring
from streamscope.core.records import State

#: See ``HEARTBEAT_NS`` in ``_native_state.c``: a busy stage restates BUSY at most this often (ns).
HEARTBEAT_NS = 100_000_000
#: See ``SERVICE_SPACING_NS`` in ``_native_state.c``: an item's service timed at most this often
#: by each of a process's first ``SERVICE_WORKERS`` workers, proportionally less often past them.
SERVICE_SPACING_NS = 1_000_000
SERVICE_WORKERS = 8
#: This process's trackers that record (``g_recording_trackers``): per process, as the C core's.
_recording = [0]


def service_spacing_ns() -> int:
    """See ``_native.service_spacing_ns``."""
    n = _recording[0]
    return SERVICE_SPACING_NS * n // SERVICE_WORKERS if n > SERVICE_WORKERS else SERVICE_SPACING_NS


_BUSY = int(State.BUSY)


class StateTracker:
    """See ``_native.StateTracker``."""

    __slots__ = (
        "beat_ns", "busy_ns", "busy_since", "cpu", "cpu_ns", "cpu_since", "name", "next_ns",
        "open", "ring", "runq0", "state", "takes",
    )  # fmt: skip

    def __init__(self, name: str, ring: Ring | None = None, cpu: bool = True) -> None:
        if not isinstance(name, str):
            raise TypeError("name must be a str")
        if ring is not None and not isinstance(ring, Ring):
            raise TypeError("ring must be a Ring or None")
        self.name = name
        _recording[0] += (ring is not None) - (getattr(self, "ring", None) is not None)
        self.ring = ring
        self.state = 0
        self.beat_ns = 0
        self.cpu = bool(cpu)
        self.takes = 0
        self.open = False
        self.busy_ns = self.busy_since = self.cpu_ns = self.cpu_since = self.next_ns = 0
        self.runq0 = -1

    def __del__(self) -> None:
        if getattr(self, "ring", None) is not None:
            _recording[0] -= 1

    def heartbeat(self) -> None:
        """See ``_native.StateTracker.heartbeat``."""
        ring = self.ring
        if ring is None or self.state != _BUSY:
            return
        now = time.monotonic_ns()
        if now - self.beat_ns >= HEARTBEAT_NS:
            self.beat_ns = now
            ring.record(_BUSY)

    def took(self) -> None:
        """See ``_native.StateTracker.took``."""
        self._item(True)

    def gave(self) -> None:
        """See ``_native.StateTracker.gave``."""
        self._item(False)

    def _item(self, took: bool) -> None:
        ring = self.ring
        if ring is None:
            return
        if took:
            self.takes += 1
        elif self.takes:
            self.heartbeat()
            return
        now = time.monotonic_ns()
        if self.state == _BUSY and now - self.beat_ns >= HEARTBEAT_NS:
            self.beat_ns = now
            ring.record(_BUSY)
        if self.open:
            busy, cpu = self.busy_ns, self.cpu_ns if self.cpu else -1
            if self.state == _BUSY:
                busy += now - self.busy_since
                if self.cpu:
                    cpu += time.thread_time_ns() - self.cpu_since
            q = _runq() if self.cpu and self.runq0 >= 0 else -1
            self.open = False
            self.next_ns = now + service_spacing_ns()
            ring.service(busy, cpu, q - self.runq0 if q >= self.runq0 >= 0 else -1)
        if not self.open and now >= self.next_ns:
            self.open = True
            self.busy_ns = self.cpu_ns = 0
            self.busy_since = now
            self.cpu_since = time.thread_time_ns() if self.cpu else 0
            self.runq0 = _runq() if self.cpu else -1

    def set(self, state: int) -> int:
        prev = self.state
        if state != prev:
            self.state = state
            ring = self.ring
            if ring is not None:
                ring.record(state)
            if self.open and _BUSY in (prev, state):
                now = time.monotonic_ns()
                cpu = time.thread_time_ns() if self.cpu else 0
                if prev == _BUSY:
                    self.busy_ns += now - self.busy_since
                    self.cpu_ns += cpu - self.cpu_since
                else:
                    self.busy_since = now
                    self.cpu_since = cpu
        return prev


def _runq() -> int:
    """The calling thread's ns so far runnable but waiting for a core (``tracker_runq``)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1])
    except (OSError, IndexError, ValueError):
        return -1


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
