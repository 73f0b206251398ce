"""What watching a program costs its process beyond the probes: the CPU time it spends loading
streamscope before the program's first line (``started``), and its threads spend making a
thread a stage's worker (its stage claimed, its tracker and rings made, and let go as it ends)
and a queue a channel (named, declared, its taps made). A program of many threads and queues
spends milliseconds on each, which no probe event counts: here they are measured around the
work itself, by each thread's own CPU clock (what it ran, not what it waited for).

In: the work, wrapped in ``spent``. Out: ``told``, written beside the session's rings as the
process ends (``SETUP_PREFIX`` and its pid), which the command gathers (``registry.gathered``)
into the run's overhead.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from streamscope.core import began, forksafe
from streamscope.pipeline.program.registry import SETUP_PREFIX

#: This process's setup so far: CPU ns, threads made workers, queues made channels (a forked
#: child starts from nothing: ``start_afresh``).
_SPENT = [0, 0, 0]
#: Guards ``_SPENT`` across this process's threads (free again in a forked child: a fork while
#: another thread counted must not leave the child's first count waiting for ever).
_LOCK = forksafe.lock()
#: How deep each thread of this process is in measured work (the outermost measures it all).
_DEPTH = threading.local()


@contextlib.contextmanager
def spent(queues: int = 0) -> Iterator[None]:
    """Count the calling thread's CPU time in the block as setup (once, however nested), and
    ``queues`` more made channels (a thread made a worker: ``one_more_thread``)."""
    depth = getattr(_DEPTH, "n", 0)
    _DEPTH.n = depth + 1
    t0 = time.thread_time_ns() if not depth else 0
    try:
        yield
    finally:
        _DEPTH.n = depth
        took = time.thread_time_ns() - t0 if not depth else 0
        with _LOCK:
            _SPENT[0] += took
            _SPENT[2] += queues


def started() -> None:
    """The program's code starts now in this process (its own, ``asmain``): what the process
    ran since streamscope began loading (its modules, the watch installed) is setup too, as a
    plain start runs none of it."""
    took = time.process_time_ns() - began.CPU_NS
    with _LOCK:
        _SPENT[0] += max(took, 0)


def one_more_thread() -> None:
    """The calling thread has become a stage's worker (its tracker made)."""
    with _LOCK:
        _SPENT[1] += 1


def start_afresh() -> None:
    """A forked child: what its parent spent is the parent's to tell."""
    _SPENT[:] = [0, 0, 0]
    _DEPTH.n = 0


def told(directory: str | None) -> None:
    """Write this process's setup cost beside the session's rings (nothing spent: nothing)."""
    with _LOCK:
        cpu_ns, threads, queues = _SPENT
    if directory is None or not (cpu_ns or threads or queues):
        return
    doc = {"setup_ns": cpu_ns, "threads": threads, "queues": queues}
    with contextlib.suppress(OSError):
        Path(directory, f"{SETUP_PREFIX}{os.getpid()}").write_text(json.dumps(doc))


__all__ = ["one_more_thread", "spent", "start_afresh", "started", "told"]
