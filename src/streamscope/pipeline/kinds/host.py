"""The ``host`` kind: a cluster's host (``resources.Host``), whose stages run in one worker on
its node, reading a clock of its own, every channel to another host a network link.

In: a resource of kind ``host``. Out: its answers to ``base.ResourceKind``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.base import RunsIn

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class HostKind:
    """Started through the cluster, not forked: the runner hands its worker the channels that
    leave or reach it (the worker makes those between its own stages) and a clock link."""

    name = "host"
    runs_in = RunsIn.CLUSTER
    event_loop = False
    link_rank = 2  # its network governs a channel to a device or to the pipeline's process
    links_own_rank = True  # between two hosts: the consumer's link
    frame_grid = True  # its agent reduces states, sub-queues and pairs on the run's frames

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return False  # not a forked child: its agent says so itself, in its hello


KIND: ResourceKind = HostKind()
