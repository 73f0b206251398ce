"""Rings made many to a file: a program's probes, one slab of rings per few dozen of them.

In: a probe id, a record kind and a capacity, in a process of a run that makes rings by the
hundred (a program of many threads and queues: a worker's state, each channel's two ends). Out:
a ring laid out as ``core.rings`` says, in the next free slot of this process's current slab
file (``SLAB_RINGS`` slots of one size, made whole, named after the process), announced in the
run's journal as ``R <slab>@<slot>``. A ring of its own cost a file's making, sizing, mapping
and closing: 18-37 us, three per thread and queue of such a program; a slot costs its header
and the journal's line, the slab's file once for every ``SLAB_RINGS``.

The monitor maps each slab once (``slab_slot`` parses a journal line's name, ``slot_view``
gives a slot's bytes) and removes the file once every slot of it was announced, closed by its
writer and drained. A forked child starts a slab of its own: its parent goes on filling the
one it was filling.
"""

from __future__ import annotations

import itertools
import mmap
import os
from pathlib import Path
from typing import Any

from streamscope.core import forksafe, heldio
from streamscope.core.rings import (
    check_capacity,
    init_header,
    journal,
    map_shared,
    mapping_type,
    ring_bytes,
)

#: Suffix of a slab's file.
SLAB_SUFFIX = ".slab"
#: Rings per slab.
SLAB_RINGS = 16


def slot_bytes(capacity: int) -> int:
    """A slot's size for rings of ``capacity``: the ring's, to whole pages (each ring starts a
    page, as a file of its own did: its records fill pages of their own)."""
    page = mmap.PAGESIZE
    return -(-ring_bytes(capacity) // page) * page


class _Slab:
    """One slab file of this process, mapped (mutable: its slots are handed out in turn)."""

    __slots__ = ("mem", "name", "size", "used")

    def __init__(self, name: str, mem: Any, size: int) -> None:
        self.name, self.mem, self.size, self.used = name, mem, size, 0


#: The slab each run directory and ring size is being filled from in this process
#: (process-wide: every recorder of the process fills the same; a forked child starts afresh,
#: ``_forget``).
_filling: dict[tuple[str, int], _Slab] = {}
#: Serial numbers of this process's slabs (with its pid, names no other process takes).
_serial = itertools.count()
#: Guards ``_filling`` among this process's threads (free again in a forked child).
_lock = forksafe.lock()


def _forget() -> None:
    _filling.clear()


os.register_at_fork(after_in_child=_forget)


def _new_slab(directory: str, size: int) -> _Slab:
    name = f"{os.getpid()}-{next(_serial)}{SLAB_SUFFIX}"
    # Its system calls keep the interpreter's lock (``heldio``), as a ring file's do.
    fd = heldio.open_file(os.path.join(directory, name), os.O_RDWR | os.O_CREAT | os.O_EXCL)
    try:
        heldio.truncate(fd, SLAB_RINGS * size)
        mem = map_shared(fd, SLAB_RINGS * size)
    finally:
        heldio.close(fd)
    return _Slab(name, mem, size)


def slot_view(mem: Any, slot: int, size: int) -> Any:
    """The ``size`` bytes of slot ``slot`` of a slab's mapping ``mem`` (they keep it mapped)."""
    return mapping_type(size).from_buffer(mem, slot * size)


def slab_ring(
    directory: str | Path, probe: int, kind: int, capacity: int, *, flags: int = 0
) -> Any:
    """A ring the monitor finds in ``directory``: a slot of this process's current slab,
    announced once its header is written (so it is never seen half made)."""
    check_capacity(capacity)
    size = slot_bytes(capacity)
    key = (str(directory), size)
    with _lock:
        slab = _filling.get(key)
        if slab is None or slab.used == SLAB_RINGS:
            slab = _filling[key] = _new_slab(key[0], size)
        slot = slab.used
        slab.used += 1
    mem = slot_view(slab.mem, slot, size)
    init_header(mem, probe, kind, capacity, flags)
    journal(directory, f"R {slab.name}@{slot}")
    return mem


def slab_slot(name: str) -> tuple[str, int] | None:
    """A journal line's ring name read as a slab's slot: (the slab's file, the slot); None for
    a ring of its own file (or a name that is neither)."""
    file, at, slot = name.rpartition("@")
    if not at or not file.endswith(SLAB_SUFFIX) or not slot.isdigit():
        return None
    n = int(slot)
    return (file, n) if n < SLAB_RINGS else None


__all__ = ["SLAB_RINGS", "SLAB_SUFFIX", "slab_ring", "slab_slot", "slot_bytes", "slot_view"]
