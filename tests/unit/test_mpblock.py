"""The locks of a recorded ``multiprocessing`` queue's shared block (``auto.mpblock``): they
keep its processes and threads out of each other's counts, and a process that dies holding one
leaves it free (a pool's worker terminated as it counted: the program must not wait for ever).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import threading
import time
from pathlib import Path

from streamscope.pipeline.program.auto.mpblock import BLOCK_BYTES, SEQ_IN, Block

FORK = mp.get_context("fork")


def _block(tmp_path: Path) -> Block:
    path = tmp_path / "counts"
    with open(path, "wb") as f:
        f.truncate(BLOCK_BYTES)
    return Block(str(path))


def _hold_and_wait(path: str, held: mp.synchronize.Event) -> None:
    with Block(path).lock(0):
        held.set()
        time.sleep(60)  # killed here, holding the lock


def test_a_process_killed_holding_a_lock_leaves_it_free(tmp_path: Path) -> None:
    block = _block(tmp_path)
    held = FORK.Event()
    child = FORK.Process(target=_hold_and_wait, args=(block.path, held))
    child.start()
    assert held.wait(30)
    os.kill(child.pid or 0, signal.SIGKILL)
    child.join(30)
    got = threading.Event()

    def take() -> None:
        with block.lock(0):
            got.set()

    taker = threading.Thread(target=take, daemon=True)
    taker.start()
    taker.join(30)
    assert got.is_set(), "the lock a killed process held was never let go"


def _count(path: str, times: int) -> None:
    block = Block(path)

    def one() -> None:
        for _ in range(times):
            with block.lock(0):
                block.add(SEQ_IN)

    threads = [threading.Thread(target=one) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def test_processes_and_their_threads_count_one_at_a_time(tmp_path: Path) -> None:
    """Two processes, two threads each, adding one at a time to the same number, which is
    read and written back (not atomic): none lost. (A second ``Block`` of the same file in a
    process, a queue that came to it twice, shares its locks.)"""
    block = _block(tmp_path)
    assert block.path is not None
    procs = [FORK.Process(target=_count, args=(block.path, 2000)) for _ in range(2)]
    for p in procs:
        p.start()
    _count(block.path, 2000)  # and this process, through another Block of the file
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert block.get(SEQ_IN) == 3 * 2 * 2000


def _take_and_stamp(path: str, out: mp.queues.SimpleQueue) -> None:  # type: ignore[type-arg]
    with Block(path).lock(0):
        out.put(time.monotonic_ns())


def test_a_child_forked_while_its_parent_holds_a_lock_waits_for_it(tmp_path: Path) -> None:
    """The child's descriptor is its own (a lock through the parent's description would let it
    in at once); the child takes the lock only after the parent let go of it, by the one
    clock both read."""
    block = _block(tmp_path)
    assert block.path is not None
    out = FORK.SimpleQueue()
    lock = block.lock(0)
    with lock:
        child = FORK.Process(target=_take_and_stamp, args=(block.path, out))
        child.start()
        time.sleep(0.3)  # the child is waiting on the lock meanwhile
        released = time.monotonic_ns()
    child.join(30)
    assert child.exitcode == 0
    assert out.get() >= released
