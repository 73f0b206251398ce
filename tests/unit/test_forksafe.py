"""Locks of ours that a fork copies held are free in the child (``core.forksafe``)."""

from __future__ import annotations

import os
import threading

import pytest

from streamscope.core import forksafe


@pytest.mark.parametrize("make", [forksafe.lock, forksafe.rlock], ids=["lock", "rlock"])
def test_a_lock_held_by_another_thread_at_fork_is_free_in_the_child(make) -> None:  # type: ignore[no-untyped-def]
    lock = make()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        pid = os.fork()
        if pid == 0:  # the child: the holder is not here; the lock must be had at once
            os._exit(0 if lock.acquire(timeout=5) else 3)
        _, status = os.waitpid(pid, 0)
    finally:
        release.set()
        holder.join()
    assert os.waitstatus_to_exitcode(status) == 0, "the child found the lock still held"
    assert lock.acquire(timeout=5), "the parent's lock stays the parent's"
    lock.release()
