"""The ``thread`` kind: stages in threads of the pipeline's own process (``resources.THREAD``).

In: a resource of kind ``thread``. Out: its answers to ``base.ResourceKind``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.base import RunsIn

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class ThreadKind:
    """Each stage a thread the runner starts; channels between them are native FIFOs."""

    name = "thread"
    runs_in = RunsIn.MAIN
    event_loop = False
    link_rank = 0
    links_own_rank = False
    frame_grid = False  # the host's own clock: the grid is the host's

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return False  # its records are the rings the monitor reads


KIND: ResourceKind = ThreadKind()
