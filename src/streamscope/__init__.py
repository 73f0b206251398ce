"""streamscope: a low-impact performance monitor for streaming-data pipelines.

Describe a ``Pipeline`` (or instrument an existing program with ``Queue`` and ``stage``), ask
performance queries, run it monitored, and read per-frame results back with ``load``.
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
from streamscope.monitor.instrument import monitor
from streamscope.monitor.session import RunOptions, RunResult
from streamscope.monitor.session import run as run
from streamscope.pipeline.dropin import MPQueue, Queue, stage
from streamscope.pipeline.pipeline import Pipeline
from streamscope.pipeline.resources import EmulatedDevice, Process
from streamscope.probes.tracing import set_enabled as tracing
from streamscope.probes.user import probe
from streamscope.query import (
    Query,
    count,
    counter,
    input_wait,
    interdeparture,
    interinsertion,
    iteration,
    latency,
    occupancy,
    output_wait,
    parse_query,
    sample,
    state,
    throughput,
    timer,
)
from streamscope.store.reader import Run, load

__version__ = "0.1.0"

__all__ = [
    "ConfigError",
    "EmulatedDevice",
    "MPQueue",
    "Pipeline",
    "PipelineError",
    "Process",
    "Query",
    "QueryError",
    "Queue",
    "Run",
    "RunFileError",
    "RunOptions",
    "RunResult",
    "StageError",
    "StreamscopeError",
    "__version__",
    "count",
    "counter",
    "input_wait",
    "interdeparture",
    "interinsertion",
    "iteration",
    "latency",
    "load",
    "monitor",
    "occupancy",
    "output_wait",
    "parse_query",
    "probe",
    "run",
    "sample",
    "stage",
    "state",
    "throughput",
    "timer",
    "tracing",
]
