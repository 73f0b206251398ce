"""The shared block of a recorded ``multiprocessing`` queue's numbers (``auto.mpqueue``): a small
file of the session's ring directory, mapped by each process that uses the queue.

In: a queue's id (the file's name). Out: a ``Block`` whose 8-byte numbers (at the offsets
below) every process using the queue reads and writes under the block's two locks
(``Block.lock``: insertions, removals), which the kernel lets go of when a process holding one
dies.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import struct
import threading
from types import TracebackType
from typing import Any

from streamscope.core import forksafe
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
#: ... and of the latest ``EARLY`` removals made before it (a pool's workers take their first
#: tasks before they know the function they apply, the stage at the queue's head), likewise.
EARLY_OUT_AT = EARLY_AT + 8 * EARLY
#: ... then what the queue is to the library that made it: ``RESULTS``, a process executor's
#: result queue, into which its workers also put their pids as they exit (no items of the
#: program's: its manager may never read them).
ROLE = EARLY_OUT_AT + 8 * EARLY
RESULTS = 1
#: ... or ``TASKS``, a ``Pool``'s task queue, into which the pool also puts an end marker for
#: each worker (``None``: no task of the program's).
TASKS = 2
#: The whole block (bytes).
BLOCK_BYTES = ROLE + 8
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
        self._locks = (Held(self, 0), Held(self, 1))

    def lock(self, which: int) -> Held:
        """Lock ``which`` (0: insertions, 1: removals) of the queue, shared by its processes."""
        return self._locks[which]

    @classmethod
    def made(cls, name: str) -> Block:
        """A new block named ``name`` (a queue made now, passed with it to other processes)."""
        return cls._file(name, os.O_EXCL)

    @classmethod
    def shared(cls, name: str) -> Block:
        """The block named ``name``, made by whichever of the session's processes asks first:
        a queue that its processes find by a name they share (a manager's, by its token)
        rather than receive with it."""
        return cls._file(name, 0)

    @classmethod
    def _file(cls, name: str, flags: int) -> Block:
        directory = REGISTRY.directory if REGISTRY.active() else None
        if directory is None:
            return cls(None)
        folder = os.path.join(directory, COUNTS)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, name)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o600)
        try:
            if os.fstat(fd).st_size < BLOCK_BYTES:
                os.ftruncate(fd, BLOCK_BYTES)  # (twice at worst: the same size, nothing lost)
        finally:
            os.close(fd)
        return cls(path)

    @property
    def mem(self) -> mmap.mmap:
        mapped = self._map
        if mapped is None:
            if self.path is None:
                mapped = mmap.mmap(-1, BLOCK_BYTES)
            else:
                fd = os.open(self.path, os.O_RDWR)
                try:
                    mapped = mmap.mmap(fd, BLOCK_BYTES)
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


class Held:
    """One of a block's locks: this process's threads take turns (a thread lock, free again in
    a forked child), then its processes do, on one byte of the block's file (an open file
    description's lock, ``F_OFD_SETLKW``). The kernel lets go of the byte when the process
    holding it dies, which a semaphore of the queue's context does not: a pool's worker
    terminated as it counted its end marker left the pool's task handler waiting on it for
    ever, and the program with it. A block without a file (no session) is this process's own:
    the thread lock is all it needs."""

    def __init__(self, block: Block, byte: int) -> None:
        self.block, self.byte = block, byte
        # one per file in this process, however many times the queue came to it
        self.threads = _thread_lock(block.path, byte) if block.path else forksafe.lock()

    def __enter__(self) -> None:
        self.threads.acquire()
        try:
            fd = _lock_fd(self.block.path)
            if fd is not None:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, _range(fcntl.F_WRLCK, self.byte))
        except BaseException:
            self.threads.release()
            raise

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            fd = _lock_fd(self.block.path)
            if fd is not None:
                fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _range(fcntl.F_UNLCK, self.byte))
        finally:
            self.threads.release()


def _range(kind: int, byte: int) -> bytes:
    """A ``struct flock`` of one byte (l_type, l_whence, l_start, l_len, l_pid: 0 for an open
    file description's lock)."""
    return _FLOCK.pack(kind, os.SEEK_SET, byte, 1, 0)


#: Each block file's descriptor, opened once per process for its locks (a forked child opens
#: its own: a lock taken through a description it shares with its parent would not keep the
#: parent out), and its threads' locks.
_lock_fds: dict[str, int] = {}
_thread_locks: dict[tuple[str, int], threading.Lock] = {}
_lock_fds_lock = forksafe.lock()


def _thread_lock(path: str, byte: int) -> threading.Lock:
    with _lock_fds_lock:
        held = _thread_locks.get((path, byte))
        if held is None:
            held = _thread_locks[(path, byte)] = forksafe.lock()
        return held


def _lock_fd(path: str | None) -> int | None:
    if path is None:
        return None
    fd = _lock_fds.get(path)
    if fd is None:
        with _lock_fds_lock:
            fd = _lock_fds.get(path)
            if fd is None:
                fd = _lock_fds[path] = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    return fd


def _forget_lock_fds() -> None:
    for fd in _lock_fds.values():  # the parent's descriptions stay open in the parent
        with contextlib.suppress(OSError):
            os.close(fd)
    _lock_fds.clear()


os.register_at_fork(after_in_child=_forget_lock_fds)


_Q = struct.Struct("q")
_FLOCK = struct.Struct("hhqqi4x")
