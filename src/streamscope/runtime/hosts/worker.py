"""On a host's node: the worker that runs that host's stages, with its agent and, for the
queries the host reduces itself, its frames (``agents.host``).

In: the pipeline, its links and its probes, pickled where the run started; the frame grids the
runner sends. Out: the stages run there, their agent's messages sent through the collector;
how the stages ended.
"""

from __future__ import annotations

import os
import queue
import sys
from typing import Any

from streamscope.core.errors import describe_exception
from streamscope.pipeline.run.child import ChildSpec, host_main
from streamscope.runtime.hosts.collector import CollectorTransport
from streamscope.runtime.hosts.link import HostLink
from streamscope.transport.control import Control

#: How often a host's worker hands its interpreter lock between threads (seconds).
SWITCH_INTERVAL_S = 0.0002

#: Calls a host's worker serves at once: its ``run``, the frame grids, a probe of its health.
WORKER_CONCURRENCY = 4


class _Grid:
    """The worker's side of the frame grids the runner sends (``poll``/``recv`` like a pipe)."""

    def __init__(self, grids: queue.SimpleQueue[tuple[Any, ...]]) -> None:
        self._grids = grids
        self._next: tuple[Any, ...] | None = None

    def poll(self, timeout_s: float = 0.0) -> bool:
        if self._next is None:
            try:
                if timeout_s > 0:
                    self._next = self._grids.get(timeout=timeout_s)
                else:
                    self._next = self._grids.get_nowait()
            except queue.Empty:
                return False
        return True

    def recv(self) -> tuple[Any, ...]:
        """The grid ``poll`` found (EOFError: none)."""
        got, self._next = self._next, None
        if got is None:
            raise EOFError("no frame grid has come")
        return got


class HostWorker:
    """On a host's node: runs that host's stages (an actor serving a few calls at once)."""

    def __init__(self) -> None:
        self._grids: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()

    def set_grid(self, origin: float, ticks_per_ns: float, domain: str = "") -> None:
        self._grids.put((origin, ticks_per_ns, domain) if domain else (origin, ticks_per_ns))

    def ping(self) -> bool:
        return True

    def run(
        self, payload: bytes, path: list[str], spec: ChildSpec, collector: Any
    ) -> tuple[str, str] | None:
        """Run ``spec.stages``; ``payload``: the pipeline, its links and its probes, pickled
        where the run started, whose code is found on this host along ``path`` (the
        starting process's module path) where it was not pickled with them."""
        from ray import cloudpickle

        # The stages, the links' movers and receivers and the agent share this interpreter:
        # hand its lock over every 0.2 ms rather than every 5 ms, so that a thread that wakes
        # (a stage's item, a transfer due) runs when it should.
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        for entry in path:
            if entry not in sys.path and os.path.isdir(entry):
                sys.path.append(entry)
        try:
            pipeline, links, probes = cloudpickle.loads(payload)
        except Exception as exc:
            return (spec.stages[0], f"could not be set up on host {spec.name!r}: "
                    f"{describe_exception(exc)}")  # fmt: skip
        control = Control(CollectorTransport(collector, spec.agent_id), spec.agent_id)
        try:
            frames = None
            if spec.frames:
                from streamscope.agents.host import HostFrames

                periods = pipeline.topology(probes).tick_periods()
                frames = HostFrames(spec.frames, probes, periods)
                for name, link in links.items():  # links into this host whose latency it pairs
                    paired = frames.stamps_for(name)
                    if paired is not None and isinstance(link, HostLink):
                        link.on_stamps = paired.receive
            return host_main(pipeline, links, probes, spec, control, _Grid(self._grids), frames)
        finally:
            control.close()
