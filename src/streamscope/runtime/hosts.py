"""A run's stages on the hosts of a cluster (the runner's ``RemoteHosts``, on Ray).

In: a started or joined ``RayCluster``, the monitor's socket, and per host its stages. Out: on
each host's node a worker running that host's stages, a clock responder reading the clock they
read, and the network links between hosts; a collector on the monitor's own node hands every
host agent's messages to the monitor, in order per agent.

Only what the hosts' agents send crosses the network: frame summaries of the sub-queues they
reduce, their stages' state frames, the frames of the queries they reduce themselves
(``agents.host``), the records the monitor reads itself (a traced run's), notes. The
stages' items cross in the links' batches, by value in the calls, with their insertion ticks
where the consumer's host pairs them (a link's latency).
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import queue
import sys
import threading
import time
from collections import deque
from types import ModuleType
from typing import Any

from streamscope.core.errors import describe_exception
from streamscope.core.stream import EOS
from streamscope.core.topology import ProbeInfo
from streamscope.pipeline.child import ChildSpec, host_main
from streamscope.pipeline.link import LinkChannel
from streamscope.pipeline.pipeline import Pipeline
from streamscope.pipeline.remote import HostEnd
from streamscope.pipeline.resources import LinkSpec
from streamscope.pipeline.worker import Channel
from streamscope.runtime.cluster import RayCluster
from streamscope.runtime.hostchannel import EndOfStream, HostChannel
from streamscope.runtime.hostclock import ClockResponder, exchange
from streamscope.timebase.calibration import Exchanges
from streamscope.transport.channels import UnixSocketTransport
from streamscope.transport.control import Control

#: Messages an agent may have on the way to the collector before it waits for the oldest.
IN_FLIGHT_MESSAGES = 32
#: The most batches a link between hosts has on the way (its network queue's capacity).
MAX_IN_FLIGHT = 64
#: How often a host's worker hands its interpreter lock between threads (seconds).
SWITCH_INTERVAL_S = 0.0002
#: Round trips in a host clock's full and short calibration bursts.
HOST_FULL_BURST = 300
HOST_SHORT_BURST = 60
#: Calls a host's worker serves at once: its ``run``, the frame grids, a probe of its health.
WORKER_CONCURRENCY = 4
#: The longest a host clock's burst lasts, per round trip asked for (seconds; a round trip
#: takes ~0.5 ms on an idle machine, milliseconds on a busy one): a run that stops waits for
#: its hosts' last bursts, short ones (0.06 s at most).
BURST_S_PER_TRIP = 0.001
#: How long a host's end that Ray caused (its worker gone, a call to an actor gone) waits for
#: the cluster to say which node was lost (seconds): a started cluster finds a dead node
#: within ~2.5 s (``cluster.HEALTH_CHECK``), and until then another node's loss may be seen
#: first as this host's end (every actor this process owns dies with the node it is attached
#: to, the head).
LOST_WAIT_S = 4.0


class NetworkBus:
    """The middle of a link between hosts: a bounded queue of batches on the consumer's host,
    which the sending side's mover fills and the receiving side's receiver empties (the
    ``bus`` of a ``LinkChannel``)."""

    def __init__(self, channel: HostChannel) -> None:
        self.channel = channel

    def put(self, msg: Any) -> None:
        self.channel.put(EndOfStream() if msg is EOS else msg)

    def get_within(self, timeout_s: float) -> tuple[bool, Any]:
        got, msg = self.channel.get_within(timeout_s)
        return got, (EOS if isinstance(msg, EndOfStream) else msg)


def in_flight_for(link: LinkSpec) -> int:
    """Batches on the way at once on ``link``: its latency's worth of transfers, and two."""
    per = max(link.transfer_ns, 1.0)
    return int(min(MAX_IN_FLIGHT, math.ceil(link.latency_ns / per) + 2))


class HostLink(LinkChannel):
    """A channel between two hosts (or a host and the pipeline's own process): a buffer at
    each end, tapped as a device link's are, and the network between them. It travels to the
    hosts' workers by pickling; each side makes its own buffers there."""

    def __init__(
        self,
        name: str,
        capacity: int,
        link: LinkSpec,
        bus: NetworkBus,
        ground_truth: bool,
        stamped: bool = False,
    ) -> None:
        self._fresh(name, capacity, link, bus, ground_truth)
        if stamped:
            self.stamp()

    def _fresh(
        self, name: str, capacity: int, link: LinkSpec, bus: NetworkBus, ground_truth: bool
    ) -> None:
        import dataclasses

        from streamscope.pipeline.channel import ThreadChannel

        self.name = name
        self.capacity = capacity
        self.link = dataclasses.replace(link, bulk_size=min(link.bulk_size, capacity))
        self.tail_buf = ThreadChannel(capacity, name=f"{name} [tail buffer]")
        self.tail_buf.watch_idle()
        self.head_buf = ThreadChannel(capacity, name=f"{name} [head buffer]")
        self.ground_truth = ground_truth
        if ground_truth:
            self.tail_buf.keep_truth("put")
            self.head_buf.keep_truth("get")
        self.bus = bus  # type: ignore[assignment]  # a network queue, not shared memory
        self.network: NetworkBus = bus
        self.transfers = 0
        self._stamps: list[int] = []
        self.late = 0  #: batches that arrived after their time (the network was slower)
        self.late_ns = 0  #: by how much, in all
        #: Batches a sender has on the way at most: enough for the latency's worth of
        #: transfers (the model lets them overlap), within the network queue's capacity.
        self.in_flight = in_flight_for(self.link)
        #: Each batch carries the ticks its items' producer tap read as they went in (the
        #: consumer's host pairs them with their removals: the link's latency, reduced there).
        self.stamped = False
        self._sent_items = 0
        #: Where the consumer's side hands each batch's (first item's number, stamps): its
        #: host's own frames (``agents.host``); None: nobody pairs them.
        self.on_stamps: Any = None

    def stamp(self) -> None:
        """Carry the insertion ticks with the items (before the first item is put)."""
        self.stamped = True
        self.tail_buf.keep_stamps()

    def next_batch(self) -> tuple[list[Any], bool]:
        if not self.stamped:
            return super().next_batch()
        m = self.tail_buf.wait_batch(self.link.bulk_size, self.link.timeout_ns / 1e9)
        batch, stamps = self.tail_buf.take_stamped(m)
        ended = bool(batch) and batch[-1] is EOS
        if ended:
            batch, stamps = batch[:-1], stamps[:-1]
        self._stamps = stamps
        return batch, ended

    def mover(self) -> None:
        """The sending side: a batch goes out in a call as it is taken from the buffer, without
        waiting for the call (at most ``in_flight`` on the way); the next may start
        ``transfer`` after it, and it is delivered ``latency`` after that. The link then
        behaves as the model that estimates it assumes, whatever the network's own timing
        below it; a batch that arrives after its time is counted (``late``)."""
        ray = self._ray()
        transfer_ns = int(self.link.transfer_ns)
        on_the_way: deque[Any] = deque()
        while True:
            items, ended = self.next_batch()
            if items:
                start = time.monotonic_ns()
                due = start + transfer_ns + int(self.link.latency_ns)
                msg: tuple[Any, ...] = (self.transfers, due, items)
                if self.stamped:
                    msg += (self._sent_items + 1, self._stamps)
                    self._sent_items += len(items)
                on_the_way.append(self.network.channel.send(msg))
                if len(on_the_way) >= self.in_flight:
                    ray.get(on_the_way.popleft())
                self.transfers += 1
                while (left := start + transfer_ns - time.monotonic_ns()) > 0:
                    time.sleep(left / 1e9)
            if ended:
                ray.get(list(on_the_way))
                self.bus.put(EOS)
                return

    def receiver(self) -> None:
        """The receiving side: each batch into the head buffer at its time (or as it comes,
        late), in the order sent (calls on the way at once may arrive in another)."""
        early: dict[int, tuple[Any, ...]] = {}
        expect = 0
        for n, *rest in self.arrivals():  # the end is sent once every batch was in
            early[n] = tuple(rest)
            while expect in early:
                self._deliver(*early.pop(expect))
                expect += 1

    def _deliver(self, due: int, items: list[Any], *stamped: Any) -> None:
        if (left := due - time.monotonic_ns()) > 0:
            time.sleep(left / 1e9)
        else:
            self.late += 1
            self.late_ns -= left
        if stamped and self.on_stamps is not None:
            self.on_stamps(*stamped)  # before the items: each is paired when it is got
        for item in items:
            self.head_buf.put(item)  # tapped ``deliver``; waits while the buffer is full

    @staticmethod
    def _ray() -> Any:
        import ray

        return ray

    def __reduce__(self) -> tuple[Any, ...]:
        return (HostLink, (self.name, self.capacity, self.link, self.bus, self.ground_truth,
                           self.stamped))  # fmt: skip


class Collector:
    """On the monitor's node: one connection to the monitor per host agent, each agent's
    messages written to it in the order it sent them (an actor)."""

    def __init__(self, socket_path: str) -> None:
        self.path = socket_path
        self.links: dict[int, UnixSocketTransport] = {}
        #: Per agent: messages and bytes it sent over the network.
        self.sent: dict[int, list[int]] = {}

    def send(self, agent_id: int, data: bytes) -> None:
        link = self.links.get(agent_id)
        if link is None:
            link = self.links[agent_id] = UnixSocketTransport(self.path)
        link.send(data)
        got = self.sent.setdefault(agent_id, [0, 0])
        got[0] += 1
        got[1] += len(data)

    def counts(self) -> dict[int, list[int]]:
        return self.sent

    def close(self, agent_id: int) -> None:
        link = self.links.pop(agent_id, None)
        if link is not None:
            link.close()

    def close_all(self) -> None:
        for agent_id in list(self.links):
            self.close(agent_id)


class CollectorTransport:
    """A host agent's link to the monitor: its messages as calls to the collector, a few on
    the way at once (calls from one caller to one actor run in the order they were made)."""

    def __init__(self, collector: Any, agent_id: int) -> None:
        import ray

        self._ray = ray
        self._collector = collector
        self._agent_id = agent_id
        self._pending: deque[Any] = deque()

    def send(self, data: bytes) -> None:
        self._pending.append(self._collector.send.remote(self._agent_id, data))
        if len(self._pending) > IN_FLIGHT_MESSAGES:
            self._ray.get(self._pending.popleft())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.get(list(self._pending))
            self._ray.get(self._collector.close.remote(self._agent_id))
        self._pending.clear()


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


class _ClockLink:
    """The calibrator's link to a host's clock responder (a clock link; see ``calibrator``).
    A round trip over the cluster's calls takes ~0.5 ms, ~20 times a socket's: its bursts
    are shorter."""

    full = HOST_FULL_BURST
    short = HOST_SHORT_BURST

    def __init__(self, ray: Any, responder: Any) -> None:
        self._ray = ray
        self._responder = responder

    def exchange(self, n: int) -> Exchanges:
        try:
            return exchange(self._ray, self._responder, n, n * BURST_S_PER_TRIP)
        except self._ray.exceptions.RayError as exc:
            raise OSError(f"the host's clock responder is gone: {exc}") from None

    def release(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.kill(self._responder)

    def close(self) -> None:
        self.release()


class ClusterHosts:
    """The runner's view of the cluster (``pipeline.remote.RemoteHosts``)."""

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
                ray.remote(Collector).options(**cluster.placement_here()).remote(socket_path)
            )
        worker = ray.remote(HostWorker)
        self._workers: dict[str, Any] = {
            h: worker.options(max_concurrency=WORKER_CONCURRENCY, **cluster.placement(h)).remote()
            for h in cluster.hosts
        }
        responder = ray.remote(ClockResponder)
        self._responders: dict[str, Any] = {
            h: responder.options(**cluster.placement(h)).remote() for h in cluster.hosts
        }
        self._queues: dict[str, HostChannel] = {}
        for ch in pipeline.channels.values():
            src, dst = pipeline.stages[ch.src].resource, pipeline.stages[ch.dst].resource
            if pipeline.link_of(ch) is not None and "host" in (src.kind, dst.kind):
                consumer = dst.name if dst.kind == "host" else None
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

    def clock(self, host: str, spec: str, epoch_ns: int) -> _ClockLink:
        responder = self._responders[host]
        self._ray.get(responder.configure.remote(spec, epoch_ns))
        return _ClockLink(self._ray, responder)

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
