"""A flight recorder: the latest raw records of a run, in bounded memory.

In: every batch of raw records the monitor reduces whose records are not kept anyway (host
stages' states, host channels' ends). Out: at the end of the run, the last ``capacity`` of them
in arrival order, and how many older ones it let go, so an export of an ordinary run still shows
state slices and occupancy for the run's last stretch. Memory: ``capacity`` records, whatever
the run's length.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from streamscope.core.options import DEFAULT_FLIGHT_RECORDS
from streamscope.core.records import RECORD_DTYPE, Records


class FlightRecorder:
    """A ring of the latest ``capacity`` records (0: none kept)."""

    def __init__(self, capacity: int = DEFAULT_FLIGHT_RECORDS) -> None:
        if capacity < 0:
            raise ValueError(f"a flight recorder keeps 0 or more records, not {capacity}")
        self.capacity = capacity
        self._ring: Records = np.zeros(capacity, dtype=RECORD_DTYPE)
        self._next = 0  # where the next record goes
        self.seen = 0  # records offered in all

    @property
    def overwritten(self) -> int:
        """Older records let go to keep the latest ``capacity``."""
        return max(self.seen - self.capacity, 0)

    def add(self, rec: Records) -> None:
        n = len(rec)
        self.seen += n
        cap = self.capacity
        if not n or not cap:
            return
        if n >= cap:
            self._ring[:] = rec[n - cap :]
            self._next = 0
            return
        first = min(n, cap - self._next)
        self._ring[self._next : self._next + first] = rec[:first]
        if first < n:
            self._ring[: n - first] = rec[first:]
        self._next = (self._next + n) % cap

    def records(self) -> Records:
        """What is kept, oldest first."""
        kept = min(self.seen, self.capacity)
        if kept < self.capacity:
            return self._ring[:kept].copy()
        out: NDArray[np.void] = np.concatenate((self._ring[self._next :], self._ring[: self._next]))
        return out
