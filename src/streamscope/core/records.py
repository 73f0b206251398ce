"""The one fixed-shape probe record and the codes stored in it.

Probes write (kind, probe, ticks, value) integers; nothing else crosses from the application side.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np
from numpy.typing import NDArray

#: One probe record, 24 bytes, little-endian: what a tap saw, where, when (raw ticks of the
#: resource's clock) and one integer of payload whose meaning depends on ``kind``.
RECORD_DTYPE = np.dtype(
    [("kind", "<u4"), ("probe", "<u4"), ("ticks", "<i8"), ("value", "<i8")],
)

Records = NDArray[np.void]


class Kind(IntEnum):
    """What a record says. The ``value`` column's meaning is given per kind."""

    #: An item was inserted at a channel's tail; value = items inserted so far (1-based sequence).
    PUT = 1
    #: An item was removed at a channel's head; value = items removed so far (1-based sequence).
    GET = 2
    #: A stage changed state; value = the new :class:`State`.
    STATE = 3
    #: Records this probe refused because its buffer was full; value = how many, ticks = when
    #: the agent noticed (at its flush).
    DROPPED = 4
    #: A counter advanced; value = the increment.
    COUNT = 5
    #: A sampled value; value = the sample.
    SAMPLE = 6
    #: A traced function was entered; value = the function's id in the run's function table.
    ENTER = 7
    #: A traced function returned (or raised); value = the function's id.
    EXIT = 8
    #: An interval ended (a timer's stop, one loop iteration); ticks = its end, value = its
    #: length in ticks.
    DURATION = 9
    #: The latest record this probe refused carried ``value`` (a channel end's sequence
    #: number, so items refused after the last kept record are still counted); ticks = when
    #: the agent noticed. Sent with the probe's DROPPED row.
    REFUSED = 10
    #: A tagged item left a path's origin (a channel out of its first stage); value = the
    #: tag: the origin's probe id << 40 | how many tags it gave so far.
    DEPART = 11
    #: A tagged item (or what became of it) was taken at a path's end; value = the tag.
    ARRIVE = 12


class State(IntEnum):
    """Stage states. Time between two STATE records belongs to the earlier one's state."""

    IDLE = 0
    BUSY = 1
    BLOCKED_IN = 2
    BLOCKED_OUT = 3

    @property
    def label(self) -> str:
        return self.name.lower()


STATE_LABELS: tuple[str, ...] = tuple(s.label for s in State)


def empty_records(n: int = 0) -> Records:
    """A zeroed record array of length ``n``."""
    return np.zeros(n, dtype=RECORD_DTYPE)


def make_records(
    kind: int, probe: int, ticks: NDArray[np.int64], values: NDArray[np.int64]
) -> Records:
    """Column arrays of one probe into records (vectorised; used when an agent flushes)."""
    out = np.empty(len(ticks), dtype=RECORD_DTYPE)
    out["kind"] = kind
    out["probe"] = probe
    out["ticks"] = ticks
    out["value"] = values
    return out
