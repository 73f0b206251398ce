"""The shared block of a recorded ``multiprocessing`` queue's numbers (``auto.mpqueue``): a small
file of the session's ring directory, mapped by each process that uses the queue.

In: a queue's id (the file's name). Out: a ``Block`` whose 8-byte numbers (at the offsets
below) every process using the queue reads and writes under the queue's own locks.
"""

from __future__ import annotations

import mmap
import os
import struct
from typing import Any

from streamscope.pipeline.program.registry import REGISTRY

#: Longest stage name a ``multiprocessing`` queue shares between processes (bytes, UTF-8).
NAME_BYTES = 160


#: The shared block of a queue's counts: sequence numbers in and out, the channel's probes
#: (declared?, tail, head), then the stages seen at its two ends.
SEQ_IN, SEQ_OUT, PROBES, ENDS = 0, 8, 16, 40
#: ... then the host clock's ticks of the latest ``EARLY`` insertions made before the channel
#: was declared (its consumer not known yet), the one numbered ``n`` at ``EARLY_AT + 8 (n %
#: EARLY)``: recorded when it is, so that what waited in the queue meanwhile counts.
EARLY = 1 << 12
EARLY_AT = ENDS + 2 * NAME_BYTES
_BLOCK = EARLY_AT + 8 * EARLY
#: The session's directory of counts blocks, in its ring directory.
COUNTS = "queue.counts"


class Block:
    """A queue's shared numbers in a small file of the session's ring directory, mapped in each
    process that uses the queue. It pickles as its file's path, which every pickler can carry
    (``multiprocessing``'s, loky's cloudpickle, ``copy``): numbers made by a context
    (``ctx.Value``) live in that context's heap, whose arenas only ``multiprocessing``'s own
    pickler can pass to a process, and joblib's could not start its workers. Without a
    session the block is this process's own."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self._map: mmap.mmap | None = None

    @classmethod
    def made(cls, name: str) -> Block:
        directory = REGISTRY.directory if REGISTRY.active() else None
        if directory is None:
            return cls(None)
        folder = os.path.join(directory, COUNTS)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, _BLOCK)
        finally:
            os.close(fd)
        return cls(path)

    @property
    def mem(self) -> mmap.mmap:
        mapped = self._map
        if mapped is None:
            if self.path is None:
                mapped = mmap.mmap(-1, _BLOCK)
            else:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    mapped = mmap.mmap(fd, _BLOCK)
                finally:
                    os.close(fd)
            self._map = mapped
        return mapped

    def get(self, at: int) -> int:
        value: int = _Q.unpack_from(self.mem, at)[0]
        return value

    def set(self, at: int, value: int) -> None:
        _Q.pack_into(self.mem, at, value)

    def add(self, at: int) -> int:
        value = self.get(at) + 1
        self.set(at, value)
        return value

    def __reduce__(self) -> tuple[Any, ...]:
        return (Block, (self.path,))


_Q = struct.Struct("q")
