"""streamscope: a low-impact performance monitor for streaming-data pipelines.

Describe a ``Pipeline`` (or instrument an existing program with ``Queue`` and ``stage``), ask
performance queries, run it monitored, and read per-frame results back with ``load``.

Each name below is imported when first used (PEP 562), so ``import streamscope`` costs almost
nothing: an application's start is not held up by the parts of streamscope it does not use.
"""

from __future__ import annotations

# isort: off
# First: the process's CPU clock as streamscope starts loading (``core.began``).
import streamscope.core.began  # noqa: F401

# isort: on
from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

# ``streamscope.monitor`` names both a subpackage (the monitor process) and the drop-in context
# manager below: the subpackage is imported first (it holds only its docstring), so importing
# its modules later never rebinds the name.
import streamscope.monitor as _monitor_package  # noqa: F401
from streamscope.core.lazy import lazy_exports
from streamscope.core.version import VERSION

__version__ = VERSION
#: The metrics' names (``query.metrics.METRIC_NAMES``: a test holds the two equal), written out
#: so that a process that never reads a query (a watched program's) loads no query module.
METRIC_NAMES = (
    "occupancy", "throughput", "count", "interinsertion", "interdeparture", "latency", "state",
    "iteration", "input_wait", "output_wait", "sample", "counter", "timer",
)  # fmt: skip

__all__ = [
    "Asyncio",
    "ConfigError",
    "EmulatedDevice",
    "Host",
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
    "StreamscopeWarning",
    "__version__",
    "load",
    "monitor",
    "parse_query",
    "probe",
    "run",
    "stage",
    "tracing",
    "watch",
]

_ERRORS = ("ConfigError", "PipelineError", "QueryError", "RunFileError", "StageError")
#: ... and a query builder per metric, named after it (``query.builder``).
__all__.extend(METRIC_NAMES)

_QUERY = ("Query", "parse_query", *METRIC_NAMES)

__getattr__, __dir__ = lazy_exports(
    globals(),
    {
        **{
            n: f"streamscope.core.errors:{n}"
            for n in (*_ERRORS, "StreamscopeError", "StreamscopeWarning")
        },
        **{n: f"streamscope.pipeline.program.dropin:{n}" for n in ("MPQueue", "Queue", "stage")},
        "Pipeline": "streamscope.pipeline.describe.pipeline:Pipeline",
        "EmulatedDevice": "streamscope.pipeline.describe.resources:EmulatedDevice",
        "Process": "streamscope.pipeline.describe.resources:Process",
        "Host": "streamscope.pipeline.describe.resources:Host",
        "Asyncio": "streamscope.pipeline.describe.resources:Asyncio",
        "tracing": "streamscope.probes.tracing:set_enabled",
        "probe": "streamscope.probes.user:probe",
        "RunOptions": "streamscope.runtime.options:RunOptions",
        "RunResult": "streamscope.runtime.options:RunResult",
        "run": "streamscope.runtime.session:run",
        "Run": "streamscope.store.reader:Run",
        "load": "streamscope.store.reader:load",
        **{n: f"streamscope.query:{n}" for n in _QUERY},
    },
)


def monitor(
    queries: Sequence[Query | str],
    options: RunOptions | None = None,
    *,
    on_frames: Any = None,
    live: bool = False,
) -> AbstractContextManager[Any]:
    """Monitor the program's instrumented queues and stages while the ``with`` block runs (see
    ``streamscope.runtime.instrument.monitor``); ``live``: show the frames on stderr as they
    close."""
    from streamscope.runtime.instrument import monitor as _monitor

    return _monitor(queries, options, on_frames=on_frames, live=live)


def watch(
    queries: Sequence[Query | str] = (),
    options: RunOptions | None = None,
    *,
    on_frames: Any = None,
    live: bool = False,
) -> AbstractContextManager[Any]:
    """Watch the code inside the ``with`` block as it is: its standard queues, threads,
    processes and asyncio tasks, as ``streamscope run`` does a program (see
    ``streamscope.runtime.instrument.watch``); no queries: the defaults. The run is the
    session's ``result`` once the block ends (in memory, or ``options.out``'s file)."""
    from streamscope.runtime.instrument import watch as _watch

    return _watch(queries, options, on_frames=on_frames, live=live)


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext streamscope``: runs shown as HTML, and the ``%%streamscope`` cell magic
    (``streamscope.runtime.notebook``)."""
    from streamscope.runtime.notebook import register

    register(ipython)


if TYPE_CHECKING:
    from streamscope.core.errors import ConfigError as ConfigError
    from streamscope.core.errors import PipelineError as PipelineError
    from streamscope.core.errors import QueryError as QueryError
    from streamscope.core.errors import RunFileError as RunFileError
    from streamscope.core.errors import StageError as StageError
    from streamscope.core.errors import StreamscopeError as StreamscopeError
    from streamscope.core.errors import StreamscopeWarning as StreamscopeWarning
    from streamscope.pipeline.describe.pipeline import Pipeline as Pipeline
    from streamscope.pipeline.describe.resources import Asyncio as Asyncio
    from streamscope.pipeline.describe.resources import EmulatedDevice as EmulatedDevice
    from streamscope.pipeline.describe.resources import Host as Host
    from streamscope.pipeline.describe.resources import Process as Process
    from streamscope.pipeline.program.dropin import MPQueue as MPQueue
    from streamscope.pipeline.program.dropin import Queue as Queue
    from streamscope.pipeline.program.dropin import stage as stage
    from streamscope.probes.tracing import set_enabled as tracing
    from streamscope.probes.user import probe as probe
    from streamscope.query import Query as Query
    from streamscope.query import parse_query as parse_query
    from streamscope.query.builder import *  # noqa: F403 - every metric's builder function
    from streamscope.runtime.options import RunOptions as RunOptions
    from streamscope.runtime.options import RunResult as RunResult
    from streamscope.runtime.session import run as run
    from streamscope.store.reader import Run as Run
    from streamscope.store.reader import load as load
