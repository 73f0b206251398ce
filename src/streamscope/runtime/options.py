"""What a monitored run is asked to do, and what it gave.

In: options from the Python API or the command line (resolved there). Out: a frozen
``RunOptions``, the run file's ``RunMeta``, and the ``RunResult`` a run returns.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import native
from streamscope.core.errors import ConfigError
from streamscope.core.version import VERSION
from streamscope.probes.agent import DEFAULT_FLUSH_INTERVAL_S
from streamscope.probes.taps import DEFAULT_CAPACITY
from streamscope.store.writer import RunMeta, RunStore

FramesCallback = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]


@dataclass(frozen=True, slots=True)
class RunOptions:
    frame_ns: int = 1_000_000_000
    out: Path | None = None
    overwrite: bool = False
    mode: str = "process"  # process: a dedicated monitor process; inline: a thread here
    #: How often a device's agent reduces and ships its own sub-queues (seconds).
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    #: Records each probe ring holds (a power of two); what the monitor has not drained yet
    #: when a ring is full is refused, and counted.
    tap_capacity: int = DEFAULT_CAPACITY
    #: Seconds between short calibration bursts of each clock domain (0: start and end only).
    calibrate_every_s: float = 2.0
    #: How each burst is fitted: hull (robust, tick-aware) or timetrial (seed 000).
    clock_method: str = "hull"
    #: Validation only: record the true insertion and removal time of every item of each link
    #: channel, and report each virtual queue's distance to its true occupancy (the estimate
    #: never reads them).
    ground_truth: bool = False
    #: Ship a device's raw records of its link buffers to the monitor too (normally only
    #: per-frame summaries cross the link, unless another query needs the records).
    device_trace: bool = False
    #: Keep every probe record in the run file (table ``record``), not only per-frame results:
    #: what ``streamscope export`` turns into state slices and events on a timeline. Implies
    #: ``device_trace``.
    trace: bool = False
    #: A stage busy this long (ns) without finishing anything is stalled: said live, and a
    #: finding. At least ``MIN_STALL_NS``: a stage that finishes items without ever waiting
    #: restates that it is busy every 100 ms.
    stall_ns: int = 10_000_000_000
    #: The latest raw records kept besides frames (a bounded flight recorder), for timelines
    #: of an ordinary run's last stretch in exports (0: none; ``trace`` keeps every record).
    flight_records: int = 200_000
    #: End the run (as interrupted, saying why) after this long (ns); None: when it ends.
    timeout_ns: int | None = None
    app: str = ""
    argv: tuple[str, ...] = ()
    command: str = ""

    def __post_init__(self) -> None:
        out: object = self.out
        if out is not None and not isinstance(out, Path):
            object.__setattr__(self, "out", Path(str(out)))  # a str or any os.PathLike
        if self.stall_ns < MIN_STALL_NS:
            raise ConfigError(
                f"stall limit {self.stall_ns / 1e6:g} ms is too short: a busy stage that "
                f"finishes items says so every 100 ms; use at least {MIN_STALL_NS // 1_000_000} ms"
            )
        if self.flight_records < 0:
            raise ConfigError(f"flight_records must be 0 or more, not {self.flight_records}")


#: The shortest stall limit (ns): several heartbeats of a busy stage (``_native.c``).
MIN_STALL_NS = 300_000_000


@dataclass(slots=True)
class RunResult:
    status: str
    error: str | None
    path: Path | None
    store: RunStore | None = None
    stage: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "failed": 1, "interrupted": 130}.get(self.status, 1)


def make_meta(name: str, opts: RunOptions) -> RunMeta:
    return RunMeta(
        run_id=uuid.uuid4().hex,
        name=name,
        app=opts.app,
        command=opts.command,
        argv=opts.argv,
        host=socket.gethostname(),
        started_unix_ns=time.time_ns(),
        frame_ns=opts.frame_ns,
        version=VERSION,
        probe_core=native.IMPLEMENTATION,
    )


#: Free space a run needs where its file goes, checked before anything runs (the file itself,
#: its write-ahead log and the reserve kept to finish it should the disk fill: store/writer.py).
MIN_FREE_BYTES = 32 << 20


def check_out(out: Path | None, overwrite: bool) -> None:
    """Refuse an output file that cannot be written, before anything runs."""
    if out is None:
        return
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists already; choose another --out or pass --overwrite")
    parent = out.parent if str(out.parent) else Path(".")
    if not parent.is_dir():
        raise ConfigError(f"cannot write {out}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise ConfigError(f"cannot write {out}: directory {parent} is not writable")
    st = os.statvfs(parent)
    free = st.f_bavail * st.f_frsize
    if free < MIN_FREE_BYTES:
        raise ConfigError(
            f"cannot write {out}: only {free / 2**20:.1f} MiB free in {parent}; a run needs at "
            f"least {MIN_FREE_BYTES >> 20} MiB (free some space or choose another --out)"
        )
