"""The ``asyncio`` kind: stages as tasks of one event loop in the pipeline's own process
(``resources.Asyncio``; the loop runs in a thread of its own, ``pipeline/run/aio.py``).

In: a resource of kind ``asyncio``. Out: its answers to ``base.ResourceKind``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.base import RunsIn

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class AsyncioKind:
    """Like a thread for everything but how its stages are started: as tasks of its loop, whose
    lag its first stage measures."""

    name = "asyncio"
    runs_in = RunsIn.MAIN
    event_loop = True
    link_rank = 0
    links_own_rank = False
    frame_grid = False

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return False


KIND: ResourceKind = AsyncioKind()
