"""The neutral timeline every export format writes: its value objects.

In: nothing (``timeline.build_timeline`` fills them from a run). Out: frozen tracks, columns of
slices, calls, counters and instants in virtual ns since the run's start, and the ``Timeline``
that holds them all, for the exporters (``export/base.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.records import Kind
from streamscope.core.topology import HOST

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]
#: Names of raw record kinds, as instant-event names.
KIND_NAMES = {int(k): k.name.lower() for k in Kind}


@dataclass(frozen=True, slots=True)
class Calls:
    """Traced function calls as columns, by thread, then in the order they were entered.

    ``tid``: the stage's thread; [``start_ns``, ``end_ns``): a call still open at the run's end
    ends there; ``function``: its id (``Timeline.function_name``); ``depth``: 0 for the
    outermost call of its thread. ``seq_begin``/``seq_end``: the ranks of each call's enter and
    exit among all calls' enters and exits, in an order that nests (by thread, then as
    recorded) -- what sorting by time alone cannot give where times tie.
    """

    tid: NDArray[np.int32]
    start_ns: I64
    end_ns: I64
    function: I64
    depth: NDArray[np.int32]
    seq_begin: I64
    seq_end: I64

    def __len__(self) -> int:
        return len(self.tid)

    @classmethod
    def empty(cls) -> Calls:
        i64 = np.zeros(0, dtype=np.int64)
        i32 = np.zeros(0, dtype=np.int32)
        return cls(i32, i64, i64, i64, i32, i64, i64)


@dataclass(frozen=True, slots=True)
class SliceEvents:
    """Begin and end events of every state slice and call, sorted by track, then time, in an
    order that nests on each track (``nest_events``).

    A track is a stage's thread (``tid``), or, where ``calls_track``, the separate track of
    that stage's calls (``Timeline.call_tracks``). ``call``: ``index`` is into
    ``Timeline.calls``, else into ``Timeline.slices``.
    """

    tid: NDArray[np.int32]
    calls_track: NDArray[np.bool_]
    t_ns: I64
    begin: NDArray[np.bool_]
    call: NDArray[np.bool_]
    index: I64

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class ProcessTrack:
    """A resource: ``pid`` from 1, its clock domain."""

    pid: int
    name: str
    kind: str
    clock_domain: str


@dataclass(frozen=True, slots=True)
class ThreadTrack:
    """A stage on a resource: ``tid`` unique across the run, from 1; ``worker``: 0 for the
    track of a stage with one worker, else which of its workers (from 1), a track each."""

    tid: int
    pid: int
    name: str
    role: str
    worker: int = 0

    @property
    def label(self) -> str:
        """The stage's name, with its worker's number where it has several."""
        return f"{self.name} worker {self.worker}" if self.worker else self.name


@dataclass(frozen=True, slots=True)
class CounterSeries:
    """Samples of one counter: the value holds from ``t_ns[i]`` until ``t_ns[i + 1]``.

    ``group``: ``occupancy`` (a channel's level), ``stat`` (a query stat per frame) or
    ``clock`` (a device clock's bound half-width, ns); ``pid`` is the resource it belongs to.
    """

    name: str
    pid: int
    unit: str
    group: str
    t_ns: I64
    values: F64
    exact: bool = False  # occupancy from raw records: every level change


@dataclass(frozen=True, slots=True)
class Slices:
    """State slices as columns: stage thread ``tid``, [start_ns, end_ns), ``state`` code."""

    tid: NDArray[np.int32]
    start_ns: I64
    end_ns: I64
    state: NDArray[np.int8]

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class Instants:
    """Raw records as instant events: thread ``tid``, time, record ``kind``, ``value``, probe."""

    tid: NDArray[np.int32]
    t_ns: I64
    kind: NDArray[np.int8]
    value: I64
    probe: NDArray[np.int32]

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class StackSamples:
    """Stack samples kept as raw records (a traced run's, or the flight recorder's last
    stretch): on thread ``tid`` (its stage's), at ``t_ns``, the worker's sampled ``state``
    (``core.records.SampledState``) and its ``stack`` (an index into
    ``Timeline.stack_names``; -1: none read)."""

    tid: NDArray[np.int32]
    t_ns: I64
    state: NDArray[np.int8]
    stack: NDArray[np.int32]

    @classmethod
    def empty(cls) -> StackSamples:
        return cls(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int8),
                   np.zeros(0, np.int32))  # fmt: skip

    def __len__(self) -> int:
        return len(self.tid)


@dataclass(frozen=True, slots=True)
class ClockDomain:
    """A clock domain: its resources, nominal tick, and each calibration burst's fit."""

    name: str
    resources: tuple[str, ...]
    tick_period_ns: float
    method: str
    bound_width_ns: tuple[float, ...]  # per burst, at its centre (clock_fit.bound_width_ns)
    feasible: tuple[bool, ...]

    def to_dict(self) -> dict[str, Any]:
        w = [x for x in self.bound_width_ns if np.isfinite(x)]
        return {
            "name": self.name,
            "resources": list(self.resources),
            "tick_period_ns": self.tick_period_ns,
            "method": self.method,
            "bursts": len(self.bound_width_ns),
            "feasible_bursts": sum(self.feasible),
            "bound_width_ns": list(self.bound_width_ns),
            "bound_width_ns_min": min(w) if w else None,
            "bound_width_ns_max": max(w) if w else None,
            "reference": self.name == HOST,
        }


@dataclass(frozen=True, slots=True)
class Timeline:
    """A whole run on one virtual-time axis (ns since the run's start)."""

    name: str
    run_id: str
    status: str
    duration_ns: int
    started_unix_ns: int
    traced: bool
    #: Older raw records the flight recorder let go (its records cover the run's last stretch).
    flight_overwritten: int
    processes: list[ProcessTrack]
    threads: list[ThreadTrack]
    slices: Slices
    counters: list[CounterSeries]
    instants: Instants
    domains: list[ClockDomain]
    calls: Calls = field(default_factory=Calls.empty)
    #: Traced functions' names (``module:qualname``); a call's ``function`` id is 1-based.
    functions: tuple[str, ...] = ()
    #: Stages (thread ``tid``) whose calls cross their state slices' bounds: their calls go on
    #: a track of their own ("STAGE calls"), since one track's slices must nest.
    call_tracks: tuple[int, ...] = ()
    #: ENTER/EXIT records that closed nothing (skipped), and calls still open at the end.
    calls_unmatched: int = 0
    calls_open_at_end: int = 0
    #: Largest bound half-width (ns) of the clock maps used for each domain's events.
    uncertainty_ns: dict[str, float] = field(default_factory=dict)
    clipped: int = 0  # events timed before the run's start, moved to 0
    #: Each stage's sampled stacks over the run: (stage, state, stack, ns), as ``stacks``.
    stacks: tuple[tuple[str, str, str, int], ...] = ()
    #: Stack samples kept as raw records, and the stacks they name.
    samples: StackSamples = field(default_factory=StackSamples.empty)
    stack_names: tuple[str, ...] = ()

    def metadata(self) -> dict[str, Any]:
        """The run and its clock domains as a JSON-able dict (every format stores it)."""
        return {
            "streamscope_run": self.name,
            "run_id": self.run_id,
            "status": self.status,
            "duration_ns": self.duration_ns,
            "started_unix_ns": self.started_unix_ns,
            "time": "virtual ns since the run's start",
            "traced": self.traced,
            "clock_domains": [d.to_dict() for d in self.domains],
            "uncertainty_ns": dict(self.uncertainty_ns),
            "events_clipped_to_start": self.clipped,
            "calls": len(self.calls),
            "calls_unmatched_records": self.calls_unmatched,
            "calls_open_at_end": self.calls_open_at_end,
        }

    def function_name(self, fid: int) -> str:
        """The name of traced function ``fid`` (1-based), or ``function FID`` if unknown."""
        return self.functions[fid - 1] if 0 < fid <= len(self.functions) else f"function {fid}"

    def function_names(self) -> list[str]:
        """``function_name(i)`` for every id the calls use, indexed by id (0 unused)."""
        top = max(len(self.functions), int(self.calls.function.max()) if len(self.calls) else 0)
        return [self.function_name(i) for i in range(top + 1)]

    @property
    def n_counter_samples(self) -> int:
        return sum(len(c.t_ns) for c in self.counters)
