"""What a monitored run is asked to do: one frozen value, resolved once at the edge (the API's
arguments or the command line), checked here, and given whole to everyone who acts on it — the
session, the runner and the monitor process (which reads it from its config).

In: keyword arguments. Out: ``RunOptions`` and its JSON form; the defaults each option starts
from, defined here once.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from streamscope.core.errors import ConfigError
from streamscope.core.modes import ClockMethod, RunMode, parse

#: How often a device's agent ships its records (seconds). Also bounds the monitor's
#: frame-closing lag.
DEFAULT_FLUSH_INTERVAL_S = 0.05
#: Records a probe ring holds (a power of two), by default and at least.
DEFAULT_TAP_CAPACITY = 1 << 16
MIN_TAP_CAPACITY = 16
#: A stage busy this long (ns) without finishing anything is stalled.
DEFAULT_STALL_NS = 10_000_000_000
#: The latest raw records the monitor keeps besides frames (its flight recorder).
DEFAULT_FLIGHT_RECORDS = 200_000
#: A virtual queue's tolerance (share of the estimated mean occupancy; ``model.selfcheck``).
DEFAULT_VQ_TOLERANCE = 0.15
#: The shortest stall limit (ns): several heartbeats of a busy stage (``_native_state.c``).
MIN_STALL_NS = 300_000_000
#: ``keep_ns`` spans at least this many of the run's frames (``store.retention``'s levels each
#: hold whole frames of their own).
KEEP_FRAMES = 4


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
    tap_capacity: int = DEFAULT_TAP_CAPACITY
    #: Seconds between short calibration bursts of each clock domain (0: start and end only).
    calibrate_every_s: float = 2.0
    #: How each burst is fitted: hull (robust, tick-aware) or timetrial (the least-squares fit of
    #: Lancaster & Chamberlain, Crossing Timezones in the TimeTrial Performance Monitor, 2010).
    clock_method: ClockMethod = ClockMethod.HULL
    #: Validation only: record the true insertion and removal time of every item of each link
    #: channel, and report each virtual queue's distance to its true occupancy (the estimate
    #: never reads them).
    ground_truth: bool = False
    #: How far (a share of its mean occupancy, at least one item) a virtual queue's estimate
    #: may be off and still be called consistent: a frame is rejected when the discrepancy its
    #: buffers show beyond chance and clock bias exceeds it.
    vq_tolerance: float = DEFAULT_VQ_TOLERANCE
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
    stall_ns: int = DEFAULT_STALL_NS
    #: The latest raw records kept besides frames (a bounded flight recorder), for timelines
    #: of an ordinary run's last stretch in exports (0: none; ``trace`` keeps every record).
    flight_records: int = DEFAULT_FLIGHT_RECORDS
    #: End the run (as interrupted, saying why) after this long (ns); None: when it ends.
    timeout_ns: int | None = None
    #: Keep frames at full resolution for this long (ns) and roll older ones up into coarser
    #: frames as the run goes (``store.retention``), so a run of any length holds few frames;
    #: None: every frame kept as it is.
    keep_ns: int | None = None
    #: A pipeline with hosts: the address of a running Ray cluster whose nodes carry the
    #: hosts' names as resources (None: streamscope starts one on this machine, one node per
    #: host, and stops it when the run ends).
    ray_address: str | None = None
    #: Stack samples per second per stage worker (0: none; the sampler slows itself down while
    #: its thread takes more than half a percent of a core).
    stack_hz: float = 100.0
    app: str = ""
    argv: tuple[str, ...] = ()
    command: str = ""
    #: The console the command that runs the run prints its summary on (its width, colour
    #: system or None, whether it is a terminal): a monitor process writes the run's summary
    #: and top findings for it (``RunResult.extra["said"]``), as it would print them. None:
    #: the command reads the run file itself.
    summary_console: tuple[int, str | None, bool] | None = None

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
        if not 0.0 <= self.vq_tolerance <= 10.0:
            raise ConfigError(
                f"vq_tolerance must be a share of the mean occupancy in [0, 10], not "
                f"{self.vq_tolerance!r}"
            )
        cap = self.tap_capacity
        if cap < MIN_TAP_CAPACITY or cap & (cap - 1):
            raise ConfigError(
                f"tap capacity {cap} is not a power of two of at least {MIN_TAP_CAPACITY} "
                f"(records a probe's buffer holds; the default is {DEFAULT_TAP_CAPACITY})"
            )
        if not 0.0 <= self.stack_hz <= 1000.0:
            raise ConfigError(
                f"stack_hz must be in [0, 1000] samples a second, not {self.stack_hz!r}"
            )
        if self.flight_records < 0:
            raise ConfigError(f"flight_records must be 0 or more, not {self.flight_records}")
        if self.keep_ns is not None and self.keep_ns < KEEP_FRAMES * self.frame_ns:
            raise ConfigError(
                f"keep {self.keep_ns / 1e9:g} s is less than {KEEP_FRAMES} frames of "
                f"{self.frame_ns / 1e9:g} s: keep at least {KEEP_FRAMES * self.frame_ns / 1e9:g} s "
                f"(or frames shorter)"
            )

    def refuse_pipeline_only(self, what: str) -> None:
        """Refuse what only a ``Pipeline``'s run can honour (its devices, its run loop), for a
        run of ``what`` (a program's queues and stages): every other field it honours."""
        default = RunOptions()
        for name, why in PIPELINE_ONLY.items():
            if getattr(self, name) != getattr(default, name):
                raise ConfigError(f"{name} cannot apply to {what}: {why}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: what the monitor process is given (``from_dict`` reads it back equal)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(
            out=str(self.out) if self.out is not None else None, mode=self.mode.value,
            clock_method=self.clock_method.value, argv=list(self.argv),
        )  # fmt: skip
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RunOptions:
        style = d.get("summary_console")
        return cls(**{**d, "argv": tuple(d.get("argv", ())),
                      "summary_console": tuple(style) if style is not None else None})  # fmt: skip


#: Options that concern a pipeline's devices only, and why.
PIPELINE_ONLY = {
    "flush_interval_s": "only a device's agent flushes (a program's stages have none)",
    "calibrate_every_s": "only devices have clocks of their own to calibrate",
    "ground_truth": "it records the true times of link channels' items, and a program has none",
    "device_trace": "it ships devices' raw records, and a program has no devices",
    "ray_address": "only a pipeline's stages are placed on hosts",
}
