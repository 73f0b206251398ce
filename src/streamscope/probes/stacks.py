"""A process's stack sampler: its ring, its stack table and the workers it samples.

In: the run's ring directory, the sampling period asked for, and this process's workers as
they come and go (their state trackers and state probes; an asyncio task's coroutine). Out: a
``stacks`` probe declared to the monitor (its target: the process's stack table file, in the
ring directory), its ring of STACK records, and the sampler's thread running
(``core.native.StackSampler``).
"""

from __future__ import annotations

import atexit
import os
from typing import Any

from streamscope.core import native
from streamscope.core.records import Kind
from streamscope.core.rings import declare, next_probe_ids, set_next_probe_id
from streamscope.core.topology import ProbeInfo, Topology
from streamscope.probes.taps import COST_SAMPLER, Recorder

#: Stack samples per second per worker asked for by default (the sampler halves its rate while
#: its own thread takes more than half a percent of a core, and comes back when it takes less).
DEFAULT_STACK_HZ = 100.0
#: The stack table file of a process, in the ring directory, by its sampler's probe id.
TABLE_NAME = "stacks-{probe}.tsv"
#: In the ring directory of a pipeline's run: the sampling period asked for (ns), for every
#: process of the run that runs stages (written before any starts).
ASKED_NAME = "stacks-period"


def ask_stacks(directory: str, period: int, first_free: int) -> None:
    """Every process of the run in ``directory`` samples its stages' stacks every ``period``
    ns (0: none), each declaring its sampler's probe, numbered from ``first_free`` on."""
    if period:
        set_next_probe_id(directory, first_free)
    with open(os.path.join(directory, ASKED_NAME), "w", encoding="ascii") as f:
        f.write(str(int(period)))


def asked_period(directory: str | None) -> int:
    """The period ``ask_stacks`` set for the run in ``directory`` (0: none asked)."""
    if directory is None:
        return 0
    try:
        with open(os.path.join(directory, ASKED_NAME), encoding="ascii") as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


class ProcessStacks:
    """This process's stack sampler, started on creation; ``add``/``remove`` its workers."""

    def __init__(
        self, recorder: Recorder, directory: str, period_ns: int, stop_after: int = 0
    ) -> None:
        #: A pipeline's process: its stages end once each, and the sampler with the last of
        #: them (``stop_after`` workers let go; 0: it stops with the session or the process).
        self.stop_after = stop_after
        self.gone = 0
        probe = next_probe_ids(directory, 1)
        self.table = os.path.join(directory, TABLE_NAME.format(probe=probe))
        self.info = ProbeInfo(probe, "stacks", self.table)
        declare(directory, Topology("", probes=(self.info,)))
        self.tap = recorder.tap(probe, Kind.STACK, cost=COST_SAMPLER)
        with open(self.table, "a", encoding="utf-8") as f:
            f.write(f"#period\t{period_ns}\n#process\t{process_name()}\n")
        self.sampler = native.StackSampler(self.tap.ring, self.table, period_ns)
        self.pid = os.getpid()
        self.sampler.start()
        # Before the interpreter lets go of anything at exit (the ring's memory included): a
        # program's process ends without the session ending there.
        atexit.register(self.stop)

    def add(self, tracker: native.StateTracker, probe: int, coro: Any = None) -> None:
        """The calling thread works as this worker (or runs the loop of the task ``coro``)."""
        self.sampler.add(tracker, probe, coro)

    def remove(self, tracker: native.StateTracker) -> None:
        if self.sampler.remove(tracker):
            self.gone += 1
            if self.stop_after and self.gone >= self.stop_after:
                self.stop()

    def stop(self) -> None:
        if self.pid == os.getpid():
            self.sampler.stop()
            atexit.unregister(self.stop)


def process_name() -> str:
    """This process as a resource is named: the program's own (``main``) or a child."""
    import multiprocessing as mp

    proc = mp.current_process()
    return "main" if proc.name == "MainProcess" else f"{proc.name} (pid {os.getpid()})"


def period_ns(hz: float) -> int:
    """The sampling period of ``hz`` samples per second per worker (0: none)."""
    return int(1e9 / hz) if hz > 0 else 0


__all__ = [
    "DEFAULT_STACK_HZ", "TABLE_NAME", "ProcessStacks", "ask_stacks", "asked_period", "period_ns",
]  # fmt: skip
