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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from streamscope.agents.ship import DEFAULT_FLUSH_INTERVAL_S
from streamscope.aggregate.points import DropCount, FrameResult
from streamscope.core import native
from streamscope.core.errors import ConfigError
from streamscope.core.modes import ClockMethod, RunMode, RunStatus, parse
from streamscope.core.version import VERSION
from streamscope.probes.taps import DEFAULT_CAPACITY
from streamscope.store.writer import RunMeta, RunStore

FramesCallback = Callable[[Sequence[FrameResult], Sequence[DropCount]], None]


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What a monitored run is asked to do, resolved once at the edge (the API's arguments or
    the command line) and checked here. A ``Pipeline``'s run honours every field; a program's
    (``monitor``, ``streamscope run prog.py``) refuses those that concern devices only
    (``PIPELINE_ONLY``)."""

    frame_ns: int = 1_000_000_000
    out: Path | None = None
    overwrite: bool = False
    #: process: a dedicated monitor process (needs ``out``); inline: a thread here.
    mode: RunMode = RunMode.PROCESS
    #: How often a device's agent reduces and ships its own sub-queues (seconds).
    flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S
    #: Records each probe ring holds (a power of two); what the monitor has not drained yet
    #: when a ring is full is refused, and counted.
    tap_capacity: int = DEFAULT_CAPACITY
    #: Seconds between short calibration bursts of each clock domain (0: start and end only).
    calibrate_every_s: float = 2.0
    #: How each burst is fitted: hull (robust, tick-aware) or timetrial (the least-squares fit of
    #: Lancaster & Chamberlain, Crossing Timezones in the TimeTrial Performance Monitor, 2010).
    clock_method: ClockMethod = ClockMethod.HULL
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
    #: A pipeline with hosts: the address of a running Ray cluster whose nodes carry the
    #: hosts' names as resources (None: streamscope starts one on this machine, one node per
    #: host, and stops it when the run ends).
    ray_address: str | None = None
    app: str = ""
    argv: tuple[str, ...] = ()
    command: str = ""

    def __post_init__(self) -> None:
        out: object = self.out
        if out is not None and not isinstance(out, Path):
            object.__setattr__(self, "out", Path(str(out)))  # a str or any os.PathLike
        object.__setattr__(self, "mode", parse(RunMode, self.mode, "monitor mode"))
        object.__setattr__(
            self, "clock_method", parse(ClockMethod, self.clock_method, "clock fit method")
        )
        if self.stall_ns < MIN_STALL_NS:
            raise ConfigError(
                f"stall limit {self.stall_ns / 1e6:g} ms is too short: a busy stage that "
                f"finishes items says so every 100 ms; use at least {MIN_STALL_NS // 1_000_000} ms"
            )
        if self.flight_records < 0:
            raise ConfigError(f"flight_records must be 0 or more, not {self.flight_records}")

    def refuse_pipeline_only(self, what: str) -> None:
        """Refuse what only a ``Pipeline``'s run can honour (its devices, its run loop), for a
        run of ``what`` (a program's queues and stages): every other field it honours."""
        default = RunOptions()
        for name, why in PIPELINE_ONLY.items():
            if getattr(self, name) != getattr(default, name):
                raise ConfigError(f"{name} cannot apply to {what}: {why}")


#: Why a run was interrupted by Ctrl-C.
INTERRUPTED = "interrupted by the user (SIGINT)"

#: Options that concern a pipeline's devices only, and why.
PIPELINE_ONLY = {
    "flush_interval_s": "only a device's agent flushes (a program's stages have none)",
    "calibrate_every_s": "only devices have clocks of their own to calibrate",
    "ground_truth": "it records the true times of link channels' items, and a program has none",
    "device_trace": "it ships devices' raw records, and a program has no devices",
    "ray_address": "only a pipeline's stages are placed on hosts",
}

#: The shortest stall limit (ns): several heartbeats of a busy stage (``_native.c``).
MIN_STALL_NS = 300_000_000


@dataclass(frozen=True, slots=True)
class RunResult:
    """How a run ended: its ``status`` and why (``error``), its file (``path``) or in-memory
    ``store``, the ``stage`` that failed it (if one did), and the monitor's own figures."""

    status: RunStatus
    error: str | None
    path: Path | None
    store: RunStore | None = None
    stage: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: A program run as it is (``streamscope run prog.py``): its exit status as ``subprocess``
    #: gives it (negative: killed by that signal); None for a pipeline.
    program_exit: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", parse(RunStatus, self.status, "run status"))

    def with_program_exit(self, code: int) -> RunResult:
        return replace(self, program_exit=code)

    @property
    def exit_code(self) -> int:
        """The command's exit status: the run's (``RunStatus.exit_code``); for a program, the
        program's own (negative: the signal that killed it), unless the program ended well
        and the run failed all the same."""
        if self.program_exit is not None and (self.program_exit or self.status != RunStatus.FAILED):
            return self.program_exit
        return self.status.exit_code


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
