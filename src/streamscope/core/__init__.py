"""Core vocabulary shared by every layer: record layout, ids, clocks and errors."""

from __future__ import annotations

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
