"""Function tracing for one run: instrument before the stages start, put everything back after.

In: a pipeline with ``Pipeline.trace(...)`` and its topology. Out: the tracer (active in this
process and, through fork, in the stage processes) and the topology with its function table.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import sys
from types import ModuleType
from typing import Any

from streamscope.core.topology import Topology
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.probes import tracing


class TracingSession:
    """Instruments the traced stages' code and the chosen modules; ``close`` restores them."""

    def __init__(self, pipeline: Pipeline) -> None:
        spec = pipeline.tracing
        assert spec is not None
        self.pipeline = pipeline
        self.tracer = tracing.FunctionTracer(
            exclude=spec.exclude, max_calls_per_s=spec.max_calls_per_s
        )
        self._stage_objs: dict[str, Any] = {}
        done: set[str] = set()
        for entry in spec.modules:
            name, _, pattern = entry.partition(":")
            self._module(importlib.import_module(name), pattern or "*", done)
        for stage in pipeline.traced_stages():
            st = pipeline.stages[stage]
            module = inspect.getmodule(st.obj if callable(st.obj) else type(st.obj))
            if module is None or module.__name__ == "builtins":
                module = inspect.getmodule(type(st.obj))
            if module is not None and module.__name__ not in ("builtins", "streamscope"):
                self._module(module, "*", done)
            if inspect.isfunction(st.obj):
                # The pipeline holds the function itself: trace it where the stage calls it.
                self._stage_objs[stage] = st.obj
                pipeline.stages[stage] = dataclasses.replace(st, obj=self.tracer.instrument(st.obj))
        tracing.activate(self.tracer)

    def _module(self, module: ModuleType, pattern: str, done: set[str]) -> None:
        key = f"{module.__name__}:{pattern}"
        if key in done or module.__name__.startswith("streamscope."):
            return
        done.add(key)
        if module.__name__ not in sys.modules:
            sys.modules.setdefault(module.__name__, module)
        self.tracer.instrument_module(module, include=(pattern,))

    def topology(self, topology: Topology) -> Topology:
        names = tuple(_readable(n) for n in self.tracer.functions)
        return dataclasses.replace(topology, functions=names)

    def excluded(self) -> dict[str, str]:
        return dict(self.tracer.excluded)

    def close(self) -> None:
        tracing.activate(None)
        self.tracer.restore()
        for stage, obj in self._stage_objs.items():
            st = self.pipeline.stages[stage]
            self.pipeline.stages[stage] = dataclasses.replace(st, obj=obj)
        self._stage_objs.clear()


#: The module name an application file is loaded under (``streamscope run APP.py``).
_APP_MODULE = "__streamscope_app__"


def _readable(name: str) -> str:
    """``__streamscope_app__:work`` → ``app:work``: the app file's functions, plainly named."""
    return "app:" + name[len(_APP_MODULE) + 1 :] if name.startswith(_APP_MODULE + ":") else name
