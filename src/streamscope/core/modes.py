"""The closed sets of words a run is described by: how its monitor runs, how clocks are fitted,
and how a run ended. Each is checked where it enters (options, the command line, a run file).

In: text from a caller, a command line or a run file. Out: a member of the set (a ``StrEnum``:
it compares equal to its text and writes as it), or a ``ConfigError`` that lists the valid ones.
"""

from __future__ import annotations

from enum import StrEnum
from typing import TypeVar

from streamscope.core.errors import ConfigError


class RunMode(StrEnum):
    """Where the monitor runs: a dedicated process (needs a run file), or a thread here."""

    PROCESS = "process"
    INLINE = "inline"


class ClockMethod(StrEnum):
    """How each calibration burst is fitted: ``hull`` (robust, tick-aware) or ``timetrial``
    (the least-squares fit of Lancaster & Chamberlain, Crossing Timezones in the TimeTrial
    Performance Monitor, 2010)."""

    HULL = "hull"
    TIMETRIAL = "timetrial"


class RunStatus(StrEnum):
    """How a run stands: being written, or how it ended."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"

    @property
    def exit_code(self) -> int:
        """The command's exit status for a run that ended so (130: as after Ctrl-C)."""
        return {"completed": 0, "interrupted": 130}.get(self.value, 1)


E = TypeVar("E", bound=StrEnum)


def parse(kind: type[E], value: object, what: str) -> E:
    """``value`` as a member of ``kind``; ``what`` names it in the error (``monitor mode``)."""
    try:
        return kind(str(value).strip().lower())
    except ValueError:
        valid = ", ".join(m.value for m in kind)
        raise ConfigError(f"unknown {what} {value!r}; valid: {valid}") from None
