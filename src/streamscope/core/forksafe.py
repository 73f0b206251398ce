"""Locks a fork cannot copy held.

In: nothing. Out: ``lock()`` and ``rlock()``, made like ``threading``'s and free again in a
child the program forks: a process forked while another of its threads holds one of our locks
(a stage claiming its name at its first ``get`` while the main thread makes a
``multiprocessing.Pool``) gets a copy of the lock held by a thread that does not exist in the
child, and would wait on it forever at its first queue operation. The threads of the child are
only the one that forked, so no thread of it can be inside what such a lock guards: each is
made anew there, as the standard library does with its own (``threading._after_fork``,
``logging``'s handlers).
"""

from __future__ import annotations

import os
import threading
import weakref
from typing import Any

#: Every lock made here that is still alive, in this process.
_locks: weakref.WeakSet[Any] = weakref.WeakSet()


def lock() -> threading.Lock:
    """A ``threading.Lock`` made free again in a forked child."""
    made = threading.Lock()
    _locks.add(made)
    return made


def rlock() -> threading.RLock:
    """A ``threading.RLock`` made free again (and unowned) in a forked child."""
    made = threading.RLock()
    _locks.add(made)
    return made


def _after_fork_in_child() -> None:
    for held in list(_locks):
        held._at_fork_reinit()


os.register_at_fork(after_in_child=_after_fork_in_child)

__all__ = ["lock", "rlock"]
