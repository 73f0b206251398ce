"""The ``device`` kind: an emulated accelerator (``resources.EmulatedDevice``), a forked child
process with a clock of its own behind a DMA-like link.

In: a resource of kind ``device`` with Python probes. Out: its answers to
``base.ResourceKind``. (A device whose probes are the simulated probe cores is the same kind
in a run file, answering as ``rtl`` says.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.base import RunsIn

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class DeviceKind:
    """Every channel between it and another resource crosses its link (only the two buffers at
    the ends are visible); its agent may reduce its own sub-queues, on the run's frame grid
    mapped onto its clock."""

    name = "device"
    runs_in = RunsIn.CHILD
    event_loop = False
    link_rank = 1  # a host's network outranks a device's bus
    links_own_rank = False  # only host <-> device channels: no bus joins two devices
    frame_grid = True

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return reduces  # the summaries of its sub-queues


KIND: ResourceKind = DeviceKind()
