"""The ``process`` kind: stages in a child process the runner forks (``resources.Process``, or
``"process"``: a process of the stage's own), with a clock of its own where it is given one.

In: a resource of kind ``process``. Out: its answers to ``base.ResourceKind``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.base import RunsIn

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class ProcessKind:
    """Channels to other processes are shared memory, visible at both ends; its rings are read
    by the monitor as they are written, so its agent reduces nothing and is handed no grid."""

    name = "process"
    runs_in = RunsIn.CHILD
    event_loop = False
    link_rank = 0
    links_own_rank = False
    frame_grid = False

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return False


KIND: ResourceKind = ProcessKind()
