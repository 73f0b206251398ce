"""The claim table's storage: one file of lines appended under a file lock, read on by each
process from where it stopped.

In: a session's ring directory. Out: the table (``ClaimTable``) while its lock is held: what
each key was given, the candidates recorded per queue and code, and the names taken, as every
process of the program wrote them. A claim costs a lock, a read of what others appended since
(nothing, mostly) and one append, however many claims came before: a program making a thousand
threads makes no thousand files. A line a killed process left half written is ended and read
as nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from typing import Any

from streamscope.core import heldio

#: The table's file in the ring directory.
LOG = "claims.log"


class ClaimTable:
    """What the table's file says, as far as this process has read it (mutable: it reads on
    and appends while the lock is held; a forked child's copy is as good as its parent's, the
    file only growing)."""

    __slots__ = ("_offset", "lists", "names", "values")

    def __init__(self) -> None:
        self._offset = 0
        self.values: dict[str, Any] = {}
        self.lists: dict[str, list[Any]] = {}
        self.names: set[str] = set()

    def _apply(self, line: bytes) -> None:
        try:
            kind, key, value = json.loads(line)
        except (ValueError, TypeError):
            return  # a line a killed process left half written
        self._take_in(kind, key, value)

    def _take_in(self, kind: str, key: str, value: Any) -> None:
        if kind == "k":
            self.values.setdefault(key, value)
        elif kind == "q":
            self.lists.setdefault(key, []).append(value)
        elif kind == "n":
            self.names.add(key)

    def read_on(self, fd: int) -> None:
        """Take in what was appended since the last read (the lock held: no writer is at work,
        so a last line without its end was left by one killed while writing: it is ended)."""
        size = heldio.size(fd)
        if size <= self._offset:
            return
        data = heldio.pread(fd, size - self._offset, self._offset)
        self._offset += len(data)
        cut = data.rfind(b"\n") + 1
        if cut < len(data):
            self._offset += heldio.write(fd, b"\n")
        for line in data[:cut].splitlines():
            self._apply(line)

    def _append(self, fd: int, kind: str, key: str, value: Any) -> None:
        line = json.dumps([kind, key, value]).encode() + b"\n"
        written = heldio.write(fd, line)
        self._offset += written
        if written == len(line):
            self._take_in(kind, key, value)  # JSON's own shapes (lists): as read back

    def put(self, fd: int, key: str, value: Any) -> None:
        """``key`` is given ``value`` (the first value given a key stays)."""
        self._append(fd, "k", key, value)

    def add(self, fd: int, key: str, value: Any) -> None:
        """``value`` joins the list under ``key``."""
        self._append(fd, "q", key, value)

    def take(self, fd: int, name: str) -> bool:
        """Take ``name``: False when it was taken already."""
        if name in self.names:
            return False
        self._append(fd, "n", name, None)
        return True


#: The table's file of each session directory, open in this process (a forked child opens
#: its own: a lock taken through a descriptor it shares with its parent would not keep the
#: parent out).
_fds: dict[str, int] = {}
#: What this process has read of each session's table (a forked child's copy stays true).
_tables: dict[str, ClaimTable] = {}


def _forget_fds() -> None:
    _fds.clear()  # the inherited descriptors stay open: closing them is the parent's


os.register_at_fork(after_in_child=_forget_fds)


@contextlib.contextmanager
def locked(directory: str) -> Iterator[tuple[ClaimTable, int]]:
    """The session's claim table, read up to date, and its file's descriptor to append with,
    locked against the program's other processes (this process's threads: the caller's
    lock)."""
    fd = _fds.get(directory)
    if fd is None:
        path = os.path.join(directory, LOG)
        fd = _fds[directory] = heldio.open_file(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    table = _tables.setdefault(directory, ClaimTable())
    # The lock's, the reads' and the appends' system calls keep the interpreter's lock: the
    # section is over before the program's other threads, waiting on it, get in (``heldio``).
    heldio.lock(fd)
    try:
        table.read_on(fd)
        yield table, fd
    finally:
        heldio.unlock(fd)


def forget() -> None:
    """The session ended: its tables are closed (the next session's are read anew)."""
    for fd in _fds.values():
        os.close(fd)
    _fds.clear()
    _tables.clear()


__all__ = ["LOG", "ClaimTable", "forget", "locked"]
