"""Probe ids taken by the threads and processes of one run: never the same id twice, however
many at a time each takes (a program's channel takes two, its workers one each)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from streamscope.core.rings import next_probe_ids, set_next_probe_id


def _taken(directory: Path, sizes: list[int]) -> list[int]:
    out: list[int] = []
    for n in sizes:
        first = next_probe_ids(directory, n)
        out.extend(range(first, first + n))
    return out


def test_threads_and_a_forked_child_never_take_one_id_twice(tmp_path: Path) -> None:
    set_next_probe_id(tmp_path, 1)
    sizes = [1, 2, 1, 2, 2, 1, 100, 1]  # 100: more than a block, straight from the counter
    got: list[list[int]] = [[] for _ in range(8)]
    go = threading.Barrier(8)

    def take(k: int) -> None:
        go.wait()
        for _ in range(40):
            got[k].extend(_taken(tmp_path, sizes))

    threads = [threading.Thread(target=take, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child takes its own, from the run's counter
        os.close(read)
        ids = _taken(tmp_path, sizes * 10)
        os.write(write, ",".join(map(str, ids)).encode())
        os._exit(0)
    os.close(write)
    for t in threads:
        t.join()
    with os.fdopen(read) as f:
        child = [int(x) for x in f.read().split(",")]
    os.waitpid(pid, 0)
    every = [i for ids in got for i in ids] + child
    assert len(every) == len(set(every)), "an id taken twice"
    assert len(child) == sum(sizes) * 10


def test_ids_are_taken_without_letting_the_programs_other_threads_in(tmp_path: Path) -> None:
    """The counter's system calls keep the interpreter's lock: a program's thread taking ids
    does not give its turn to the others at each call (and wait for it back behind them)."""
    import sys

    set_next_probe_id(tmp_path, 1)
    spins, stop = [0], threading.Event()

    def spin() -> None:
        while not stop.is_set():
            spins[0] += 1

    before = sys.getswitchinterval()
    sys.setswitchinterval(0.5)  # the spinner gets in only where the lock is let go
    t = threading.Thread(target=spin)
    t.start()
    try:
        while spins[0] == 0:
            pass  # the spinner has run: it holds the lock or waits for it from now on
        seen = spins[0]
        firsts = [next_probe_ids(tmp_path, 100) for _ in range(5)]  # past a block: the file
        assert spins[0] == seen, "the lock was let go while ids were taken"
    finally:
        stop.set()
        t.join()
        sys.setswitchinterval(before)
    assert firsts == sorted(set(firsts))
