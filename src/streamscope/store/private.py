"""Run files are their owner's alone: the run file and what is made beside it (its lock, its
reserve, DuckDB's write-ahead log) are ``0600``, or stricter where the umask is.

A run file holds the program's whole command line, which may carry a token or a password.
In: a path to make, or a process of streamscope's own. Out: ``make_private`` (a new empty file of mode
``PRIVATE`` less the umask), ``match_mode`` (a sibling given a run file's mode), ``keep_private``
(every file a process of our own makes from then on, DuckDB's included, is private: the
monitor's, ``retime``'s). What a user asks to be written by path (a report, an export) keeps
the umask.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE", "keep_private", "make_private", "match_mode"]

#: A run file's mode, and its siblings': read and written by its owner alone.
PRIVATE = 0o600


def make_private(path: Path) -> int:
    """Make ``path``, empty (it must not exist), with mode ``PRIVATE`` less the umask; that
    mode."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE)
    try:
        return os.fstat(fd).st_mode & 0o777
    finally:
        os.close(fd)


def match_mode(sibling: Path, path: Path) -> None:
    """Give ``sibling`` (if it is there) ``path``'s mode, where it has more: a file that
    another library made beside a run file with the process's umask (DuckDB's log, in a
    process that is not ours to change)."""
    with contextlib.suppress(OSError):
        mode = os.stat(path).st_mode & 0o777
        if os.stat(sibling).st_mode & 0o777 & ~mode:
            os.chmod(sibling, mode)


def keep_private() -> None:
    """Every file this process makes from now on is its owner's alone (the umask keeps what
    it forbids already, and forbids group and others everything). Only for a process of
    streamscope's own: the umask is the whole process's."""
    os.umask(os.umask(0o077) | 0o077)
