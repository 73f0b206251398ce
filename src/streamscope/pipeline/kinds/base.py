"""What a kind of resource means to the rest of the pipeline: the questions its code asks of
where a stage runs, and the rules that follow for a channel between two kinds.

In: a resource's kind (``kind_of`` in ``registry``). Out: its answers -- whether its stages
run in the pipeline's own process, a forked child or a cluster's worker, whether they are
tasks of an event loop, how its end of a channel crosses to another resource, whether its
agent is handed the run's frame grid and announced as sending data -- and, from two kinds,
a channel's transport and the end whose link governs it.

Each kind is a module of this package, one object (``KIND``) answering ``ResourceKind``.
Adding one, say a GPU: write ``kinds/gpu.py`` with a class answering every member below and
``KIND = GpuKind()``, add it to ``KINDS`` in ``registry``, and give users a constructor
beside ``resources.EmulatedDevice`` that returns ``Resource(name, "gpu", ...)``. Nothing else
in ``pipeline`` asks what a kind means by its name; the name is what run files record
(``ResourceInfo.kind``), and what the layers below this one, which read run files and cannot
import it, compare (``agents.assignments``, ``query.plan``).
"""

from __future__ import annotations

import enum
from typing import Protocol


class RunsIn(enum.Enum):
    """Where a resource's stages run, and so who starts them."""

    #: Threads of the pipeline's own process, which the runner starts itself.
    MAIN = "main"
    #: A child process the runner forks (before it starts any thread of its own), one per
    #: resource, running the resource's stages in threads with an agent of its own.
    CHILD = "child"
    #: A worker on a cluster's node, started through the cluster (``pipeline.run.remote``).
    CLUSTER = "cluster"


class ResourceKind(Protocol):
    @property
    def name(self) -> str:
        """The kind as resources and run files name it (``Resource.kind``, ``ResourceInfo.kind``)."""
        ...

    @property
    def runs_in(self) -> RunsIn:
        """Where its stages run (in the pipeline's process, a forked child, a cluster's worker)."""
        ...

    @property
    def event_loop(self) -> bool:
        """Whether its stages are tasks of one event loop rather than threads of their own
        (the loop's lag is then measured from its first stage)."""
        ...

    @property
    def link_rank(self) -> int:
        """0: a channel from or to it crosses no link of its own (shared memory between
        processes). Above 0: it sits behind a link (a bus, a network), and a channel between it
        and another resource is a link channel, governed by the link of the end that ranks
        higher (see ``link_end``)."""
        ...

    @property
    def links_own_rank(self) -> bool:
        """Whether a link channel may join two resources of its rank (the consumer's link then
        governs); False: such a channel is refused."""
        ...

    @property
    def frame_grid(self) -> bool:
        """Whether its agent reduces records on the run's frame grid, mapped onto its own clock
        after each calibration burst and handed to it (a forked child: through a pipe)."""
        ...

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        """Whether the runner announces its forked child's agent to the monitor, before any
        child starts, as one that sends data frames must wait for: ``reduces``, it reduces
        sub-queues of its own; ``samples``, one of its stages has an active sampler."""
        ...


def channel_transport(src: ResourceKind, dst: ResourceKind, *, shared: bool) -> str:
    """The transport (``ChannelInfo.transport``) of a channel from a stage on a resource of kind
    ``src`` to one on ``dst`` (``shared``: the same resource): ``thread`` where both ends are in
    one process, ``link`` where either end sits behind a link, else ``process``."""
    if shared or src.runs_in is dst.runs_in is RunsIn.MAIN:
        return "thread"
    return "link" if src.link_rank or dst.link_rank else "process"


def link_end(src: ResourceKind, dst: ResourceKind) -> str | None:
    """Whose link a link channel between ``src`` and ``dst`` crosses: ``"src"`` or ``"dst"``
    (the end of higher rank; between equals, the consumer), None where the two may not be
    joined by a link."""
    if src.link_rank != dst.link_rank:
        return "src" if src.link_rank > dst.link_rank else "dst"
    return "dst" if src.links_own_rank and dst.links_own_rank else None
