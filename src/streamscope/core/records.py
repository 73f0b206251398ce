"""The one fixed-shape probe record and the codes stored in it.

Probes write (kind, probe, ticks, value) integers; nothing else crosses from the application side.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    #: One probe record, 24 bytes, little-endian: what a tap saw, where, when (raw ticks of
    #: the resource's clock) and one integer of payload whose meaning depends on ``kind``.
    RECORD_DTYPE: np.dtype[np.void]
    Records = NDArray[np.void]

#: ``RECORD_DTYPE``'s fields: the kinds and probes below need no numpy, and a program's process,
#: whose probes write records through the probe core, never imports it for them.
RECORD_FIELDS = (("kind", "<u4"), ("probe", "<u4"), ("ticks", "<i8"), ("value", "<i8"))


def __getattr__(name: str) -> Any:
    """``RECORD_DTYPE`` and ``Records``, made with numpy the first time they are asked for."""
    if name not in ("RECORD_DTYPE", "Records"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import numpy as np
    from numpy.typing import NDArray

    made = {"RECORD_DTYPE": np.dtype(list(RECORD_FIELDS)), "Records": NDArray[np.void]}
    globals().update(made)
    return made[name]


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
    #: One worker's stack sampled (by its process's stack sampler, ``core/_native_stacks.c``);
    #: value = the worker's state probe << 32 | the sampler's period shift << 28 | the sampled
    #: state (:class:`SampledState`) << 24 | the stack's id in its process's stack table (0:
    #: no stack read).
    STACK = 13


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

#: A STATE record's value for a worker whose work is over (its thread or process's target
#: returned, or its thread went on to another stage): from then on it is in no state, its
#: time unknown, as after its process ended; not idle, which would count a worker that no
#: longer exists against its stage's busy share.
NO_STATE = -1


#: The frame that stands for streamscope's own code in a sampled stack (its probes, the
#: wrappers of a watched program's queues and threads), however deep it went there.
OWN_FRAME = "(streamscope)"


class SampledState(IntEnum):
    """A worker's state at a stack sample: its tracker's, with a busy worker told apart by
    whether its thread was on a core (or runnable) then, or waiting (asleep, on I/O or a lock,
    the interpreter's included; an asyncio task awaiting)."""

    IDLE = 0
    RUNNING = 1
    BLOCKED_IN = 2
    BLOCKED_OUT = 3
    WAITING = 4

    @property
    def label(self) -> str:
        return self.name.lower()


def empty_records(n: int = 0) -> Records:
    """A zeroed record array of length ``n``."""
    import numpy as np

    return np.zeros(n, dtype=__getattr__("RECORD_DTYPE"))


def make_records(
    kind: int, probe: int, ticks: NDArray[np.int64], values: NDArray[np.int64]
) -> Records:
    """Column arrays of one probe into records (vectorised; used when an agent flushes)."""
    import numpy as np

    out = np.empty(len(ticks), dtype=__getattr__("RECORD_DTYPE"))
    out["kind"] = kind
    out["probe"] = probe
    out["ticks"] = ticks
    out["value"] = values
    return out
