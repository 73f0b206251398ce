"""streamscope: a low-impact performance monitor for streaming-data pipelines.

Describe a ``Pipeline`` (or instrument an existing program with ``Queue`` and ``stage``), ask
performance queries, run it monitored, and read per-frame results back with ``load``.

Each name below is imported when first used (PEP 562), so ``import streamscope`` costs almost
nothing: an application's start is not held up by the parts of streamscope it does not use.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

# ``streamscope.monitor`` names both a subpackage (the monitor process) and the drop-in context
# manager below: the subpackage is imported first (it holds only its docstring), so importing
# its modules later never rebinds the name.
import streamscope.monitor as _monitor_package  # noqa: F401

__version__ = "0.1.0"

#: Public name -> (module, attribute).
_EXPORTS: dict[str, tuple[str, str]] = {
    "ConfigError": ("streamscope.core.errors", "ConfigError"),
    "PipelineError": ("streamscope.core.errors", "PipelineError"),
    "QueryError": ("streamscope.core.errors", "QueryError"),
    "RunFileError": ("streamscope.core.errors", "RunFileError"),
    "StageError": ("streamscope.core.errors", "StageError"),
    "StreamscopeError": ("streamscope.core.errors", "StreamscopeError"),
    "MPQueue": ("streamscope.pipeline.dropin", "MPQueue"),
    "Queue": ("streamscope.pipeline.dropin", "Queue"),
    "stage": ("streamscope.pipeline.dropin", "stage"),
    "Pipeline": ("streamscope.pipeline.pipeline", "Pipeline"),
    "EmulatedDevice": ("streamscope.pipeline.resources", "EmulatedDevice"),
    "Process": ("streamscope.pipeline.resources", "Process"),
    "tracing": ("streamscope.probes.tracing", "set_enabled"),
    "probe": ("streamscope.probes.user", "probe"),
    "RunOptions": ("streamscope.runtime.options", "RunOptions"),
    "RunResult": ("streamscope.runtime.options", "RunResult"),
    "run": ("streamscope.runtime.session", "run"),
    "Run": ("streamscope.store.reader", "Run"),
    "load": ("streamscope.store.reader", "load"),
    **{
        name: ("streamscope.query", name)
        for name in (
            "Query", "count", "counter", "input_wait", "interdeparture", "interinsertion",
            "iteration", "latency", "occupancy", "output_wait", "parse_query", "sample", "state",
            "throughput", "timer",
        )
    },
}  # fmt: skip

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


def __getattr__(name: str) -> Any:
    found = _EXPORTS.get(name)
    if found is None:
        raise AttributeError(f"module 'streamscope' has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0]), found[1])
    globals()[name] = value
    return value


def monitor(
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: Any = None,
) -> AbstractContextManager[Any]:
    """Monitor the program's instrumented queues and stages while the ``with`` block runs (see
    ``streamscope.runtime.instrument.monitor``)."""
    from streamscope.runtime.instrument import monitor as _monitor

    return _monitor(queries, options, on_frames=on_frames)


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:
    from streamscope.core.errors import (
        ConfigError,
        PipelineError,
        QueryError,
        RunFileError,
        StageError,
        StreamscopeError,
    )
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
    from streamscope.runtime.options import RunOptions, RunResult
    from streamscope.runtime.session import run
    from streamscope.store.reader import Run, load
