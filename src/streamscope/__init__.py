"""streamscope: a low-impact performance monitor for streaming-data pipelines.

Describe a ``Pipeline``, ask performance queries, run it monitored, read per-frame results.
"""

from __future__ import annotations

from streamscope.core.errors import (
    ConfigError,
    PipelineError,
    QueryError,
    RunFileError,
    StageError,
    StreamscopeError,
)
from streamscope.pipeline.pipeline import Pipeline
from streamscope.pipeline.resources import Process

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "Pipeline",
    "PipelineError",
    "Process",
    "QueryError",
    "RunFileError",
    "StageError",
    "StreamscopeError",
    "__version__",
]
