"""The runner's view of the cluster (``pipeline.run.remote.RemoteHosts``): on each host's node
a worker for its stages and its clock's responder, the network queue of each channel between
hosts, the collector on the monitor's node, and how each host's stages ended.

In: a started or joined ``RayCluster``, the monitor's socket, the pipeline. Out: the links, the
clock links and the hosts' ends the runner asks for; each lost node named by its own id.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import threading
import time
from types import ModuleType
from typing import Any

from streamscope.core.topology import ProbeInfo
from streamscope.pipeline.channels.link import LinkChannel
from streamscope.pipeline.describe.pipeline import Pipeline
from streamscope.pipeline.describe.resources import LinkSpec
from streamscope.pipeline.kinds import RunsIn, kind_of
from streamscope.pipeline.run.child import ChildSpec
from streamscope.pipeline.run.remote import HostEnd
from streamscope.pipeline.run.worker import Channel
from streamscope.runtime.hosts.channel import HostChannel
from streamscope.runtime.hosts.clock import ClockLink, ClockResponder
from streamscope.runtime.hosts.cluster import RayCluster
from streamscope.runtime.hosts.collector import Collector
from streamscope.runtime.hosts.link import MAX_IN_FLIGHT, HostLink, NetworkBus
from streamscope.runtime.hosts.worker import WORKER_CONCURRENCY, HostWorker

#: How long a host's end that Ray caused (its worker gone, a call to an actor gone) waits for
#: the cluster to say which node was lost (seconds): a started cluster finds a dead node
#: within ~2.5 s (``cluster.HEALTH_CHECK``), and until then another node's loss may be seen
#: first as this host's end (every actor this process owns dies with the node it is attached
#: to, the head).
LOST_WAIT_S = 4.0


class ClusterHosts:
    """The runner's view of the cluster (``pipeline.run.remote.RemoteHosts``)."""

    def __init__(self, cluster: RayCluster, socket_path: str | None, pipeline: Pipeline) -> None:
        """Starts, on each host, the worker for its stages and its clock's responder, the
        network queue of each of ``pipeline``'s channels between hosts (on its consumer's
        host), and the collector on this node; returns once every one answers (so that a
        run's start does not wait for the cluster's processes)."""
        self.cluster = cluster
        self._ray = cluster.ray
        ray = self._ray
        self._collector: Any = None
        if socket_path is not None:
            self._collector = (
                ray.remote(Collector).options(**cluster.on_this_node()).remote(socket_path)
            )
        worker = ray.remote(HostWorker)
        self._workers: dict[str, Any] = {
            h: worker.options(max_concurrency=WORKER_CONCURRENCY, **cluster.on_node(h)).remote()
            for h in cluster.hosts
        }
        responder = ray.remote(ClockResponder)
        self._responders: dict[str, Any] = {
            h: responder.options(**cluster.on_node(h)).remote() for h in cluster.hosts
        }
        self._queues: dict[str, HostChannel] = {}
        for ch in pipeline.channels.values():
            src, dst = pipeline.stages[ch.src].resource, pipeline.stages[ch.dst].resource
            on_cluster = [kind_of(r).runs_in is RunsIn.CLUSTER for r in (src, dst)]
            if pipeline.link_of(ch) is not None and any(on_cluster):
                consumer = dst.name if on_cluster[1] else None
                self._queues[ch.name] = HostChannel(cluster, MAX_IN_FLIGHT + 1, consumer)
        ray.get(
            [w.ping.remote() for w in self._workers.values()]
            + [r.read.remote() for r in self._responders.values()]
            + [q.ready() for q in self._queues.values()]
        )
        self._runs: dict[Any, str] = {}  # the ref of each host's run -> the host
        self._stages: dict[str, list[str]] = {}
        self._agents: dict[int, str] = {}  # agent id -> its host
        self._lock = threading.Lock()

    def link(
        self, name: str, capacity: int, link: LinkSpec, consumer: str | None, slot_bytes: int,
        ground_truth: bool,
    ) -> LinkChannel:  # fmt: skip
        return HostLink(name, capacity, link, NetworkBus(self._queues[name]), ground_truth)

    def clock(self, host: str, spec: str, epoch_ns: int) -> ClockLink:
        responder = self._responders[host]
        self._ray.get(responder.configure.remote(spec, epoch_ns))
        return ClockLink(self._ray, responder)

    def start(
        self,
        host: str,
        pipeline: Pipeline,
        links: dict[str, Channel],
        probes: tuple[ProbeInfo, ...],
        spec: ChildSpec,
    ) -> None:
        cloudpickle: Any = importlib.import_module("ray.cloudpickle")
        worker = self._workers[host]
        self._stages[host] = list(spec.stages)
        self._agents[spec.agent_id] = host
        for module in _user_modules(pipeline):
            cloudpickle.register_pickle_by_value(module)
        payload = cloudpickle.dumps((pipeline, links, probes))
        with self._lock:
            self._runs[worker.run.remote(payload, list(sys.path), spec, self._collector)] = host

    def send_grid(self, host: str, origin: float, ticks_per_ns: float, domain: str = "") -> None:
        worker = self._workers.get(host)
        if worker is not None:
            worker.set_grid.remote(origin, ticks_per_ns, domain)

    def poll(self) -> list[HostEnd]:
        """The hosts whose stages ended since the last call. An end that Ray caused may be
        another node's loss seen here first: when a node is lost, the first end names it
        (``_loss``), whichever host's end showed it."""
        with self._lock:
            refs = list(self._runs)
            if not refs:
                return []
            done, _ = self._ray.wait(refs, num_returns=len(refs), timeout=0)
            ends = [self._end(self._runs.pop(ref), ref) for ref in done]
        causes = [cause for _, cause in ends if cause is not None]
        if causes:
            lost = self._lost()
            if lost:
                return [self._loss(lost, causes[0]), *(end for end, _ in ends)]
        return [end for end, _ in ends]

    def _end(self, host: str, ref: Any) -> tuple[HostEnd, str | None]:
        """How ``host``'s stages ended as its run's result tells it, and, where Ray caused
        the end (a system error, not one of the stages' own), Ray's error."""
        ray = self._ray
        try:
            failed = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # raised in the worker: its node answered
            end = HostEnd(host, self._stages[host][0], _first_line(exc))
            by_ray = isinstance(getattr(exc, "cause", None), ray.exceptions.RayError)
            return end, end.error if by_ray else None
        except ray.exceptions.RayError as exc:  # the worker is gone: its node, or its owner's
            cause = _first_line(exc)
            return self._loss([host], cause), cause
        if failed is None:
            return HostEnd(host), None
        end = HostEnd(host, failed[0], failed[1])
        return end, failed[1].splitlines()[0] if _ray_error(ray, failed[1]) else None

    def _lost(self, wait_s: float = LOST_WAIT_S) -> list[str]:
        """The hosts whose node the cluster counts dead (by each node's own id), waiting up
        to ``wait_s`` for it to find one: [] if it finds none (or cannot be asked)."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                lost = self.cluster.lost()
            except Exception:  # the cluster's control service itself is gone
                return []
            if lost or time.monotonic() >= deadline:
                return lost
            time.sleep(0.1)

    def _loss(self, hosts: list[str], cause: str) -> HostEnd:
        """The end of a run that lost ``hosts``, each named with its own node's id and its
        stages; ``cause``: Ray's error that showed the loss."""
        named = "; ".join(
            f"host {h!r} (node {self._node(h)}) was lost with its stages "
            f"{', '.join(self._stages.get(h, ()))}"
            for h in hosts
        )
        stages = self._stages.get(hosts[0], [None])
        return HostEnd(hosts[0], stages[0], f"{named}: {cause}", lost=True)

    def _node(self, host: str) -> str:
        try:
            return self.cluster.node_of(host)[:12]
        except KeyError:
            return "?"

    def traffic(self) -> dict[str, dict[str, int]]:
        """Per host: the messages and bytes its agent sent to the monitor so far."""
        if self._collector is None:
            return {}
        try:
            got = self._ray.get(self._collector.counts.remote(), timeout=5.0)
        except self._ray.exceptions.RayError:
            return {}
        return {self._agents[a]: {"messages": m, "bytes": b}
                for a, (m, b) in got.items() if a in self._agents}  # fmt: skip

    def running(self) -> bool:
        with self._lock:
            return bool(self._runs)

    def stop(self) -> None:
        ray = self._ray
        for worker in self._workers.values():
            with contextlib.suppress(Exception):
                ray.kill(worker)
        for responder in self._responders.values():
            with contextlib.suppress(Exception):
                ray.kill(responder)
        for channel in self._queues.values():
            with contextlib.suppress(Exception):
                channel.shutdown()
        if self._collector is not None:
            with contextlib.suppress(Exception):
                ray.get(self._collector.close_all.remote(), timeout=5.0)
            with contextlib.suppress(Exception):
                ray.kill(self._collector)
        self._workers.clear()
        self._responders.clear()
        self._queues.clear()
        with self._lock:
            self._runs.clear()


def _user_modules(pipeline: Pipeline) -> list[ModuleType]:
    """The modules of the stages' code that a host could not import by their names (a
    pipeline file loaded under a name of its own, a script's ``__main__``): their code travels
    with the pipeline. Other modules are imported there by name."""
    out = []
    for spec in pipeline.stages.values():
        fn = spec.obj
        name = getattr(fn, "__module__", None) or getattr(type(fn), "__module__", None)
        module = sys.modules.get(name or "")
        if module is None or module in out:
            continue
        file = getattr(module, "__file__", None) or ""
        stem = os.path.splitext(os.path.basename(file))[0]
        if name == "__main__" or (file and stem != name.rsplit(".", 1)[-1]):  # type: ignore[union-attr]
            out.append(module)
    return out


def _ray_error(ray: Any, text: str) -> bool:
    """Whether a stage's reported error (``Type: message``) is one of Ray's own (a call to
    an actor on a lost node), not the stage's."""
    name = text.split(":", 1)[0]
    cls = getattr(ray.exceptions, name, None)
    return (
        isinstance(cls, type)
        and issubclass(cls, ray.exceptions.RayError)
        and not issubclass(cls, ray.exceptions.RayTaskError)
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"
