"""The table of resource kinds, and the kind of a resource.

In: a ``Resource`` (its ``kind``, and for a device its ``rtl``). Out: the ``ResourceKind`` that
answers for it, or a ``PipelineError`` naming the kinds there are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamscope.core.errors import PipelineError
from streamscope.pipeline.kinds import asyncio, device, host, process, rtl, thread

if TYPE_CHECKING:
    from streamscope.pipeline.describe.resources import Resource
    from streamscope.pipeline.kinds.base import ResourceKind

#: Every kind, by its name (``Resource.kind``), in the order errors list them.
KINDS: dict[str, ResourceKind] = {
    k.name: k for k in (thread.KIND, process.KIND, device.KIND, asyncio.KIND, host.KIND)
}
#: The flavours of a kind whose probes are the simulated probe cores (``Resource.rtl`` set).
RTL: dict[str, ResourceKind] = {rtl.KIND.name: rtl.KIND}


def kind_of(resource: Resource) -> ResourceKind:
    """What ``resource``'s kind means (an RTL device's flavour where it has a simulator)."""
    kind = (RTL.get(resource.kind) if resource.rtl else None) or KINDS.get(resource.kind)
    if kind is None:
        raise PipelineError(
            f"resource {resource.name!r}: unknown resource kind {resource.kind!r}; valid: "
            f"{', '.join(KINDS)}"
        )
    return kind
