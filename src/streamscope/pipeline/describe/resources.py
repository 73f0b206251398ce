"""Resources: where stages run. ``thread`` (the pipeline's own process), ``process`` and
``device`` (an emulated accelerator: a process with a clock of its own behind a DMA-like link).

A resource is a name plus a kind; stages on the same ``Process`` or ``EmulatedDevice`` resource
share one child process, those on the same ``Host`` one worker on that host's node of a cluster.
What each kind means is its module's in ``pipeline.kinds`` (``kind_of``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from streamscope.core.errors import PipelineError
from streamscope.core.extras import require
from streamscope.core.topology import HOST
from streamscope.pipeline.kinds import KINDS, RunsIn, kind_of
from streamscope.timebase.emulated import EmulatedClockSpec


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """The bus between the host and a device, as a DMA engine sees it.

    Items wait in a buffer at the sending side until ``bulk_size`` of them are there (or no item
    has arrived for ``timeout_ns``, or the stream ends); one transfer then moves them, occupying
    the bus for ``transfer_ns``, and they reach the buffer at the receiving side ``latency_ns``
    after the transfer ends (latency is pipelined: the next transfer may start meanwhile).
    """

    bulk_size: int = 16
    transfer_ns: float = 500_000.0
    latency_ns: float = 0.0
    timeout_ns: float = math.inf

    @classmethod
    def from_us(
        cls, bulk_size: int, transfer_us: float, latency_us: float, timeout_us: float | None
    ) -> LinkSpec:
        """A link given in µs (``timeout_us`` None: no timeout)."""
        timeout_ns = math.inf if timeout_us is None else timeout_us * 1e3
        return cls(bulk_size, transfer_us * 1e3, latency_us * 1e3, timeout_ns)

    def __post_init__(self) -> None:
        if int(self.bulk_size) != self.bulk_size or self.bulk_size < 1:
            raise PipelineError(f"link: bulk_size must be an integer >= 1, not {self.bulk_size!r}")
        for key in ("transfer_ns", "latency_ns"):
            v = getattr(self, key)
            if not (math.isfinite(v) and v >= 0.0):
                raise PipelineError(f"link: {key} must be finite and >= 0, not {v!r}")
        if not self.timeout_ns > 0.0:
            raise PipelineError(
                f"link: timeout_ns must be > 0 (inf: none), not {self.timeout_ns!r}"
            )


@dataclass(frozen=True, slots=True)
class Resource:
    """``clock``: an emulated clock spec (``"rate_ppm=37,offset_s=12.5,tick_ns=7.5"``); the
    resource then has a clock domain of its own, named after it, that the monitor calibrates."""

    name: str
    kind: str
    clock: str = ""
    link: LinkSpec | None = None  #: a device's bus (kind ``device`` only)
    #: A device whose probes are the simulated probe cores (``hw.rtl``), not Python ones: the
    #: simulator that runs them (``amaranth`` or ``verilator``); "" for Python probes.
    rtl: str = ""

    @property
    def in_main_process(self) -> bool:
        return kind_of(self).runs_in is RunsIn.MAIN

    @property
    def domain(self) -> str:
        return self.name if self.clock else HOST


THREAD = Resource("main", "thread")


def Asyncio(name: str = "loop") -> Resource:  # noqa: N802 - a constructor
    """An asyncio event loop in the pipeline's own process: every stage placed on it is a task
    of the loop (its function may be a coroutine function, a source an async generator), and
    the loop runs in a thread of its own (``pipeline/run/aio.py``)."""
    return Resource(name, "asyncio")


def Process(name: str, *, clock: str | None = None) -> Resource:  # noqa: N802 - a constructor
    """A named child process; every stage placed on it runs there, each in its own thread.

    ``clock``: give the process an emulated clock of its own (rate error, offset, drift, tick;
    see ``streamscope.timebase.emulated``); its probes then record that clock's raw ticks.
    """
    if clock:
        EmulatedClockSpec.parse(clock)  # refuse a bad spec now, with the key that is wrong
    return Resource(name, "process", str(EmulatedClockSpec.parse(clock)) if clock else "")


def EmulatedDevice(  # noqa: N802 - a constructor
    name: str,
    *,
    clock: str = "rate_ppm=25,offset_s=3.5,drift_ppb_s=10,tick_ns=7.5",
    bulk_size: int = 16,
    transfer_us: float = 500.0,
    latency_us: float = 0.0,
    timeout_us: float | None = None,
    rtl: bool | str = False,
) -> Resource:
    """An emulated accelerator: its stages run in a process of their own, with a clock of their
    own (``clock``, an emulated clock spec; the monitor is never told it and calibrates it), and
    every channel between it and the host crosses a DMA-like link (see :class:`LinkSpec`):
    ``bulk_size`` items per transfer of ``transfer_us``, ``latency_us`` in flight, and a flush
    after ``timeout_us`` without a new item (None: only full transfers and the end of stream).

    Only the two buffers at the ends of such a channel are visible; its occupancy is estimated
    by simulation and checked against them (a *virtual queue*).

    ``rtl``: an RTL device, whose probes are the probe cores (``streamscope hw``) simulated
    cycle by cycle and read over a register link as real hardware is: its samplers' storage
    is the storage core (every sample written and every drop decided by its arbiter), and its
    clock answers calibration from the timestamp core. A free-running counter starts at 0 and
    never goes back, so the clock must not start below 0 or step back. ``rtl=True`` (or
    ``"amaranth"``) simulates the cores in Amaranth's simulator; ``"verilator"`` compiles them
    with Verilator first (seconds, once per configuration; hundreds of times faster after).
    Either needs Amaranth (``streamscope[hw]``; a ``MissingExtraError`` without it).
    """
    if not clock:
        raise PipelineError(f"device {name!r}: an emulated device needs a clock spec")
    parsed = EmulatedClockSpec.parse(clock)
    sim = ("amaranth" if rtl else "") if isinstance(rtl, bool) else rtl
    if sim not in ("", "amaranth", "verilator"):
        raise PipelineError(
            f"device {name!r}: rtl must be True, 'amaranth' or 'verilator', not {rtl!r}"
        )
    if sim and (parsed.offset_s < 0 or parsed.step_ns < 0):
        raise PipelineError(
            f"device {name!r}: an RTL device's counter starts at 0 and never steps back; its "
            f"clock needs offset_s >= 0 and step_ns >= 0 (got {clock!r})"
        )
    if sim:
        # Here rather than in the device's processes, where its stages would fail one by one.
        require("amaranth", f"device {name!r}: an RTL device's probe cores need Amaranth")
    link = LinkSpec.from_us(bulk_size, transfer_us, latency_us, timeout_us)
    return Resource(name, "device", str(parsed), link, sim)


def Host(  # noqa: N802 - a constructor
    name: str,
    *,
    clock: str | None = None,
    bulk_size: int = 16,
    transfer_us: float = 5000.0,
    latency_us: float = 5000.0,
    timeout_us: float | None = 2000.0,
) -> Resource:
    """A host of a cluster: its stages run together in one worker on the node that carries
    the host's name (a Ray node with a resource ``name``), each in its own thread.

    Every host is a timezone: its stages read a clock of its own, which the monitor calibrates
    by round trips over the cluster's calls. ``clock``: an emulated clock spec for that clock
    (rate error, offset, drift, tick: for tests on one machine; the monitor is never told it);
    None: the host's own monotonic clock.

    Every channel between the host and another one is a network link: a buffer at each end,
    the network between them opaque (a *virtual queue*, estimated and checked). Items leave
    the sending buffer in batches of up to ``bulk_size`` (or after ``timeout_us`` without a new
    item, or at the end), one call each, one batch every ``transfer_us`` at most (the link's
    pace), each delivered ``latency_us`` after its transfer ends. Where the network's own
    timing stays below these the link behaves as the model that estimates it assumes (its
    self-check says when it does not): a call between two hosts of a cluster on one machine
    takes ~0.6 ms back to back and ~2-3 ms (up to ~5) after a pause, hence 5 ms each by default
    (up to 16 items per 5 ms a link; raise ``bulk_size`` for more).
    """
    spec = EmulatedClockSpec.parse(clock or "")
    link = LinkSpec.from_us(bulk_size, transfer_us, latency_us, timeout_us)
    return Resource(name, "host", str(spec), link)


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
    if resource == "asyncio":
        return Asyncio()
    if resource == "process":
        return Resource(f"proc:{stage}", "process")
    raise PipelineError(
        f"stage {stage!r}: unknown resource {resource!r}; valid: 'thread', 'process', "
        "'asyncio', Process(name), Asyncio(name), EmulatedDevice(name) or Host(name)"
    )
