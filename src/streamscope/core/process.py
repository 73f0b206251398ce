"""Child processes that must not outlive the process that started them, and the signals a
run's processes share."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

_PR_SET_PDEATHSIG = 1

#: Signals a terminal, a shell or a supervisor sends to a run's whole process group as readily
#: as to one of its processes: the process that runs a program passes each on to it, the
#: monitor lives through them (its application ends the run and says how).
GROUP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
                 signal.SIGUSR2)  # fmt: skip


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """Ask the kernel to send ``sig`` to this process when its parent dies (Linux), and exit at
    once if the parent already died before the request took effect."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent_pid:
        os._exit(0)


#: glibc's mallopt parameters (malloc.h): the freed memory kept for later allocations rather
#: than given back to the OS, and the size from which a block is mapped on its own.
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: What ``keep_freed_memory`` keeps, and the blocks it takes from the heap.
KEEP_FREED_BYTES = 64 << 20
HEAP_BLOCK_BYTES = 32 << 20


#: What the math libraries numpy may be built on read for their number of threads.
MATH_THREADS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")


def one_math_thread() -> None:
    """Before numpy loads in this process: its linear algebra runs on the calling thread. At
    load, OpenBLAS starts a thread per core that spins while it waits for work (again after
    each call that used it): some 60 ms of CPU at the monitor's start, a third of what
    ``streamscope show`` spent, on a machine whose cores the program needs. The matrices here
    are small; one thread does them as fast. Only for streamscope's own processes (the
    monitor, the commands that read a run): never a program's, which keeps what it was given."""
    for name in MATH_THREADS:
        os.environ[name] = "1"


def keep_freed_memory() -> bool:
    """Ask the C library's malloc to keep up to ``KEEP_FREED_BYTES`` of freed memory for the
    next allocations, and to take blocks under ``HEAP_BLOCK_BYTES`` from its heap rather than
    map each afresh: the monitor's virtual-queue estimation makes and drops ~150 MB of arrays a
    channel's frame, and by default much of it came back as fresh pages, one fault each (12,660
    faults a frame, some 10 ms of its ~60 ms of CPU). The process's memory then stays at what it
    needed at most, plus the kept 64 MB at most. False where the C library is not glibc."""
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, HEAP_BLOCK_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, KEEP_FREED_BYTES)
    )


class SignalInterrupt(KeyboardInterrupt):
    """A signal other than SIGINT (SIGTERM) that ends a run as Ctrl-C does; ``signum`` is it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def interruption(exc: KeyboardInterrupt) -> str:
    """Why a run that ``exc`` ended was interrupted, the signal named."""
    sig = getattr(exc, "signum", signal.SIGINT)
    if sig == signal.SIGINT:
        return "interrupted by the user (SIGINT)"
    return f"interrupted by {signal.Signals(sig).name}"


def machine_busy_ns() -> int:
    """CPU time the whole machine has spent busy since it started, every CPU added (ns;
    ``/proc/stat``), -1 where it cannot be read: what else ran beside a run (the what-if
    model's background load) is this less the run's own."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
    except OSError:
        return -1
    if not fields or fields[0] != "cpu":
        return -1
    # user nice system idle iowait irq softirq steal ...: all but idle and iowait
    ticks = [int(x) for x in fields[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def end_now(code: int) -> None:
    """End this process with ``code`` once its work is done: its exit handlers run and its
    standard streams flushed, then at once, skipping the interpreter's teardown (freeing
    DuckDB's, numpy's and every module's state: 40-60 ms that do nothing for anyone). Where a
    thread is left to wait for, as ``sys.exit`` ends it."""
    import atexit
    import sys
    import threading

    me = threading.current_thread()
    if any(not t.daemon and t is not me for t in threading.enumerate()):
        sys.exit(code)
    atexit._run_exitfuncs()
    with contextlib.suppress(OSError, ValueError):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)
