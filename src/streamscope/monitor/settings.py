"""How a run's monitor reduces and what it keeps: one frozen value, the same for a monitor in a
process of its own (written to and read from its config file) and one in a thread.

In: the run's options, as the launcher resolved them. Out: ``MonitorSettings``, and its JSON form.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from streamscope.core.modes import ClockMethod, parse
from streamscope.monitor.flight import DEFAULT_FLIGHT_RECORDS
from streamscope.monitor.stalls import DEFAULT_STALL_NS
from streamscope.store.writer import RunMeta


@dataclass(frozen=True, slots=True)
class MonitorSettings:
    """``meta``: the run's (its start is filled in when it starts); ``frame_ns``: the drop
    counts' frame; ``truth_dir``: validation runs' true times (read after every estimate);
    ``trace``: keep every raw record; ``stall_ns``: a stage busy this long without finishing is
    stalled; ``flight_records``: the latest raw records kept besides frames."""

    meta: RunMeta
    frame_ns: int
    clock_method: ClockMethod = ClockMethod.HULL
    truth_dir: str | None = None
    trace: bool = False
    stall_ns: int = DEFAULT_STALL_NS
    flight_records: int = DEFAULT_FLIGHT_RECORDS

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "clock_method": self.clock_method.value}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MonitorSettings:
        m = d["meta"]
        return cls(
            meta=RunMeta(**{**m, "argv": tuple(m["argv"])}),
            frame_ns=int(d["frame_ns"]),
            clock_method=parse(ClockMethod, d.get("clock_method", "hull"), "clock fit method"),
            truth_dir=d.get("truth_dir"),
            trace=bool(d.get("trace", False)),
            stall_ns=int(d.get("stall_ns", DEFAULT_STALL_NS)),
            flight_records=int(d.get("flight_records", DEFAULT_FLIGHT_RECORDS)),
        )
