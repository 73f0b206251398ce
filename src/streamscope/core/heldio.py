"""Short system calls on local files made holding the interpreter's lock.

In: a file's descriptor or path. Out: what ``os`` and ``fcntl`` would give, the lock held
throughout. Python releases the interpreter's lock around every system call; for a call that
takes microseconds (a tmpfs file's open, truncation, a line's write, a read of a small file, a
lock no one holds) that only lets the program's other threads in, and the caller then waits
for the lock back behind them: a program starting 500 threads, each making its stage's and
queues' rings and claiming their names inside a section other threads wait on, spent a third
of its start so. These calls go through the C library loaded as ``ctypes.PyDLL`` (which keeps
the lock), where there is one; ``os`` and ``fcntl`` otherwise. A lock that another holds is
waited for the ordinary way (``flock``).
"""

from __future__ import annotations

import ctypes
import fcntl
import os
from typing import Any


def _libc() -> Any:
    try:
        libc = ctypes.PyDLL(None, use_errno=True)
        sigs = {
            "open": ((ctypes.c_char_p, ctypes.c_int, ctypes.c_int), ctypes.c_int),
            "close": ((ctypes.c_int,), ctypes.c_int),
            "ftruncate": ((ctypes.c_int, ctypes.c_long), ctypes.c_int),
            "write": ((ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t), ctypes.c_ssize_t),
            "pread": (
                (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long),
                ctypes.c_ssize_t,
            ),
            "lseek": ((ctypes.c_int, ctypes.c_long, ctypes.c_int), ctypes.c_long),
            "flock": ((ctypes.c_int, ctypes.c_int), ctypes.c_int),
            "mmap": (
                (
                    ctypes.c_void_p,
                    ctypes.c_size_t,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_int,
                    ctypes.c_long,
                ),
                ctypes.c_void_p,
            ),
            "munmap": ((ctypes.c_void_p, ctypes.c_size_t), ctypes.c_int),
            "madvise": ((ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int), ctypes.c_int),
        }
        for name, (args, result) in sigs.items():
            fn = getattr(libc, name)
            fn.argtypes, fn.restype = args, result
    except (OSError, AttributeError):
        return None
    return libc


#: The C library, its calls keeping the interpreter's lock (None: not reachable: ``os``).
LIBC = _libc()


def _checked(result: int) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return result


def open_file(path: str, flags: int, mode: int = 0o600) -> int:
    """``os.open``, always with ``O_CLOEXEC``."""
    flags |= os.O_CLOEXEC
    if LIBC is None:
        return os.open(path, flags, mode)
    return _checked(LIBC.open(os.fsencode(path), flags, mode))


def close(fd: int) -> None:
    if LIBC is None:
        os.close(fd)
    else:
        _checked(LIBC.close(fd))


def truncate(fd: int, size: int) -> None:
    if LIBC is None:
        os.ftruncate(fd, size)
    else:
        _checked(LIBC.ftruncate(fd, size))


def write(fd: int, data: bytes) -> int:
    """One ``write`` (of a line: short); the bytes written."""
    if LIBC is None:
        return os.write(fd, data)
    return _checked(LIBC.write(fd, data, len(data)))


def pread(fd: int, n: int, offset: int) -> bytes:
    if LIBC is None:
        return os.pread(fd, n, offset)
    buf = ctypes.create_string_buffer(n)
    got = _checked(LIBC.pread(fd, buf, n, offset))
    return buf.raw[:got]


def size(fd: int) -> int:
    """The file's size (its end, its offset left as it was)."""
    if LIBC is None:
        return os.fstat(fd).st_size
    here = _checked(LIBC.lseek(fd, 0, os.SEEK_CUR))
    end = _checked(LIBC.lseek(fd, 0, os.SEEK_END))
    _checked(LIBC.lseek(fd, here, os.SEEK_SET))
    return end


def lock(fd: int) -> None:
    """``flock(fd, LOCK_EX)``: taken at once where no other process holds it, else waited
    for with the interpreter's lock let go."""
    if LIBC is not None and LIBC.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB) == 0:
        return
    fcntl.flock(fd, fcntl.LOCK_EX)


def unlock(fd: int) -> None:
    if LIBC is None:
        fcntl.flock(fd, fcntl.LOCK_UN)
    else:
        _checked(LIBC.flock(fd, fcntl.LOCK_UN))


__all__ = ["LIBC", "close", "lock", "open_file", "pread", "size", "truncate", "unlock", "write"]
