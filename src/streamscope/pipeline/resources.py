"""Resources: where stages run. ``thread`` (the pipeline's own process) and ``process``.

A resource is a name plus a kind; stages on the same ``Process`` resource share one child process.
Devices and remote hosts will add kinds here.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscope.core.errors import PipelineError
from streamscope.timebase.emulated import EmulatedClockSpec


@dataclass(frozen=True, slots=True)
class Resource:
    """``clock``: an emulated clock spec (``"rate_ppm=37,offset_s=12.5,tick_ns=7.5"``); the
    resource then has a clock domain of its own, named after it, that the monitor calibrates."""

    name: str
    kind: str
    clock: str = ""

    @property
    def in_main_process(self) -> bool:
        return self.kind == "thread"

    @property
    def domain(self) -> str:
        return self.name if self.clock else "host"


THREAD = Resource("main", "thread")
KINDS = ("thread", "process")


def Process(name: str, *, clock: str | None = None) -> Resource:  # noqa: N802 - a constructor
    """A named child process; every stage placed on it runs there, each in its own thread.

    ``clock``: give the process an emulated clock of its own (rate error, offset, drift, tick;
    see ``streamscope.timebase.emulated``); its probes then record that clock's raw ticks.
    """
    if clock:
        EmulatedClockSpec.parse(clock)  # refuse a bad spec now, with the key that is wrong
    return Resource(name, "process", str(EmulatedClockSpec.parse(clock)) if clock else "")


def resolve(resource: str | Resource, stage: str) -> Resource:
    """``"thread"`` → the main process; ``"process"`` → a child process of the stage's own."""
    if isinstance(resource, Resource):
        if resource.kind not in KINDS:
            raise PipelineError(
                f"stage {stage!r}: unknown resource kind {resource.kind!r}; valid: {', '.join(KINDS)}"
            )
        return resource
    if resource == "thread":
        return THREAD
    if resource == "process":
        return Resource(f"proc:{stage}", "process")
    raise PipelineError(
        f"stage {stage!r}: unknown resource {resource!r}; valid: 'thread', 'process' or Process(name)"
    )
