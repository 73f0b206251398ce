"""What the runner needs from a cluster to place stages on its hosts (``runtime.hosts`` is the
cluster's side; the runner stays free of any cluster library).

In: a host's stages, the channels that leave or reach it, its clock spec. Out: the stages
running on that host, a clock link to that host's clock, and how each host's stages ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.describe.resources import LinkSpec

if TYPE_CHECKING:
    from streamscope.core.topology import ProbeInfo
    from streamscope.pipeline.describe.pipeline import Pipeline
    from streamscope.pipeline.run.calibrator import ClockLink
    from streamscope.pipeline.run.child import ChildSpec
    from streamscope.pipeline.run.worker import Channel


@dataclass(frozen=True, slots=True)
class HostEnd:
    """How one host's stages ended: ``error`` None when every one of them ended; else the
    stage that failed (or the host's first, when the host itself was lost) and what happened."""

    host: str
    stage: str | None = None
    error: str | None = None
    lost: bool = False  #: the host itself died or became unreachable


class RemoteHosts(Protocol):
    def link(
        self, name: str, capacity: int, link: LinkSpec, consumer: str | None, slot_bytes: int,
        ground_truth: bool,
    ) -> LinkChannel:  # fmt: skip
        """A channel between two hosts (``consumer``: the host of its consumer; None: the
        pipeline's own process)."""
        ...

    def clock(self, host: str, spec: str, epoch_ns: int) -> ClockLink:
        """A responder on ``host`` reading the clock its stages read."""
        ...

    def start(
        self,
        host: str,
        pipeline: Pipeline,
        links: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        spec: ChildSpec,
    ) -> None:
        """Run ``spec.stages`` on ``host`` (its agent sends to the monitor as ``spec.agent_id``)."""
        ...

    def send_grid(self, host: str, origin: float, ticks_per_ns: float, domain: str = "") -> None:
        """Where the run's frame grid lies on ``host``'s clock (for what it reduces), or on
        clock domain ``domain``'s (a producer whose items ``host`` pairs)."""
        ...

    def poll(self) -> list[HostEnd]:
        """The hosts whose stages ended since the last call."""
        ...

    def traffic(self) -> dict[str, dict[str, int]]:
        """Per host: ``messages`` and ``bytes`` its agent sent to the monitor so far."""
        ...

    def running(self) -> bool:
        """Whether any host's stages still run."""
        ...

    def stop(self) -> None:
        """Stop every host's stages and let go of everything this run placed on the cluster."""
        ...
