"""An RTL device: a ``device`` (``resources.EmulatedDevice(..., rtl=...)``) whose probes are the
probe cores, simulated cycle by cycle (``hw.rtl``) -- a flavour of the device kind, not a kind
of its own: it runs, links and keeps time as any device does, and run files call it ``device``.

In: a resource of kind ``device`` with a simulator (``Resource.rtl``). Out: its answers to
``base.ResourceKind``, a device's but for what its agent sends.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.pipeline.kinds.device import DeviceKind

if TYPE_CHECKING:
    from streamscope.pipeline.kinds.base import ResourceKind


class RtlDeviceKind(DeviceKind):
    """Its samplers' storage is the storage core, whose samples its agent sends the monitor;
    its clock answers from the timestamp core and its sub-queues are reduced by the channel
    monitor core (each chosen by ``Resource.rtl``, the simulator, where the device starts)."""

    def sends_data(self, reduces: bool, samples: bool) -> bool:
        return reduces or samples


KIND: ResourceKind = RtlDeviceKind()
