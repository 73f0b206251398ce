"""Resources: where stages run. ``thread`` (the pipeline's own process) and ``process``.

A resource is a name plus a kind; stages on the same ``Process`` resource share one child process.
Devices and remote hosts will add kinds here.
"""

from __future__ import annotations

from dataclasses import dataclass

from streamscope.core.errors import PipelineError


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    kind: str

    @property
    def in_main_process(self) -> bool:
        return self.kind == "thread"


THREAD = Resource("main", "thread")
KINDS = ("thread", "process")


def Process(name: str) -> Resource:  # noqa: N802 - reads like a constructor in user code
    """A named child process; every stage placed on it runs there, each in its own thread."""
    return Resource(name, "process")


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
