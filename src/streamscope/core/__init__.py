"""Core vocabulary shared by every layer: record layout, ids, clocks and errors.

The names below are imported when first used: importing a module of this package (an error
class, the probe core) does not import the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.lazy import lazy_exports

__all__ = [
    "RECORD_DTYPE",
    "AppError",
    "Clock",
    "ConfigError",
    "FakeClock",
    "HostClock",
    "Kind",
    "PipelineError",
    "QueryError",
    "RunFileError",
    "StageError",
    "State",
    "StreamscopeError",
    "empty_records",
]

_ERRORS = (
    "AppError", "ConfigError", "PipelineError", "QueryError", "RunFileError", "StageError",
    "StreamscopeError",
)  # fmt: skip

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        **{n: f"streamscope.core.clock:{n}" for n in ("Clock", "FakeClock", "HostClock")},
        **{n: f"streamscope.core.errors:{n}" for n in _ERRORS},
        **{
            n: f"streamscope.core.records:{n}"
            for n in ("RECORD_DTYPE", "Kind", "State", "empty_records")
        },
    },
)

if TYPE_CHECKING:
    from streamscope.core.clock import Clock, FakeClock, HostClock
    from streamscope.core.errors import (
        AppError,
        ConfigError,
        PipelineError,
        QueryError,
        RunFileError,
        StageError,
        StreamscopeError,
    )
    from streamscope.core.records import RECORD_DTYPE, Kind, State, empty_records
