"""The hosts a run spreads over: a Ray cluster that streamscope starts (and stops) or joins.

In: the hosts' names (each becomes a node with a resource of that name, so a stage placed on a
host runs on its node) and a directory for the cluster's files, or the address of a cluster
already running. Out: a connected ``RayCluster`` that says which node each host is, and, when
streamscope started it, a cluster gone without a process left when the block ends.

Every part binds to loopback: the nodes of a cluster started here are processes of this machine
(separate hosts in every respect the monitor can see: their own raylets, object stores, clocks).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from streamscope.core.closing import Closing
from streamscope.core.errors import ConfigError
from streamscope.core.extras import require
from streamscope.runtime.hosts.nodeprocs import (
    check_interrupted,
    driver_signals_kept,
    ray_processes,
    signals_held,
    sigterm_kept,
    stop_nodes,
    stop_strays,
)

#: Ray's settings for a cluster on this machine, set before Ray is imported: no usage reports,
#: addresses resolved to loopback rather than to the machine's own address, and workers at
#: the application's priority (Ray starts them at nice 15: a host's stages, its links and its
#: clock's responder then wait behind every other process of the machine).
RAY_ENV = {
    "RAY_USAGE_STATS_ENABLED": "0",
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_worker_niceness": "0",
}
#: Each node of a cluster started here: its CPUs and its object store (bytes).
NODE_CPUS = 1
NODE_OBJECT_STORE = 80 << 20
#: How a cluster started here finds a node dead: a health check every half second, dead after
#: four missed in a row (Ray's defaults take 15 s; a run then fails within ~2-3 s of a loss).
HEALTH_CHECK = {
    "health_check_period_ms": 500,
    "health_check_timeout_ms": 500,
    "health_check_failure_threshold": 4,
}
#: The longest directory for a started cluster's files: Ray puts Unix sockets ~62 bytes below
#: it, and a socket's path has at most 107.
MAX_DIR_BYTES = 45
#: How long joining waits for the cluster's address to answer (seconds). Ray itself retries an
#: address where nothing answers for minutes, printing each retry.
JOIN_TIMEOUT_S = 3.0
#: The start of an HTTP/2 connection (RFC 9113 §3.4): the preface and an empty SETTINGS frame.
#: A Ray cluster's address is a gRPC server, which answers with a SETTINGS frame of its own.
_H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes((0, 0, 0, 4, 0, 0, 0, 0, 0))
_H2_SETTINGS = 4


def _ray() -> ModuleType:
    """Ray, imported only when hosts are asked for (it takes a second and much memory), with
    ``RAY_ENV`` set first: Ray reads it when it is imported, and its nodes inherit it. Not
    installed: a ``MissingExtraError`` naming ``streamscope[hosts]``."""
    if "ray" in sys.modules and any(os.environ.get(k) != v for k, v in RAY_ENV.items()):
        raise ConfigError(
            "Ray was imported before streamscope could bind it to loopback: import it through "
            "streamscope (RayCluster(...).ray), or set "
            + " ".join(f"{k}={v}" for k, v in RAY_ENV.items())
            + " before importing it"
        )
    for key, value in RAY_ENV.items():
        os.environ.setdefault(key, value)
    return require("ray")


class RayCluster(Closing):
    """A Ray cluster whose nodes are the run's hosts. ``start`` makes one of ``hosts`` on this
    machine; ``join`` connects to ``address`` (its nodes must carry the hosts' names as
    resources). ``node_of(host)`` is the node a host's stages run on; ``close`` disconnects and,
    for a cluster started here, stops every node and removes its files."""

    def __init__(
        self,
        hosts: Sequence[str],
        cluster: Any,
        directory: Path | None,
        *,
        owns_driver: bool = True,
    ) -> None:
        self.hosts = tuple(hosts)
        self._cluster = cluster
        self._dir = directory
        self._ray = _ray()
        #: Whether this cluster connected this process (else it shares a connection it found).
        self._owns_driver = owns_driver
        #: Ray itself, as this cluster set it up (import it no other way before it starts).
        self.ray = self._ray
        found = self._nodes()
        missing = [h for h in self.hosts if h not in found]
        if missing:
            self.close()
            known = ", ".join(sorted(found)) or "(none)"
            raise ConfigError(
                f"no node of the cluster carries host {', '.join(missing)!r}; nodes with host "
                f"names: {known} (start each node with --resources '{{\"HOST\": 1}}')"
            )
        self._node_ids = found

    @classmethod
    def start(cls, hosts: Sequence[str], directory: str | Path | None = None) -> RayCluster:
        """A cluster of one node per host on this machine, bound to loopback; its files in
        ``directory`` (a new temporary one if None, removed at ``close``)."""
        if len(set(hosts)) != len(hosts) or not hosts:
            raise ConfigError(f"hosts must be one or more distinct names, not {list(hosts)}")
        ray = _ray()
        from ray.cluster_utils import Cluster

        # Ray's Unix sockets live under it: a short path (their names have a length limit).
        base = Path(directory or tempfile.mkdtemp(prefix="ss-ray-", dir="/tmp"))
        if len(str(base).encode()) > MAX_DIR_BYTES:
            raise ConfigError(
                f"the cluster's directory {base} is too long for Ray's sockets under it: "
                f"use one of at most {MAX_DIR_BYTES} bytes (or none: a new one in /tmp)"
            )
        os.makedirs("/tmp/ray", exist_ok=True)  # where Ray records the latest cluster
        node: dict[str, Any] = {"num_cpus": NODE_CPUS, "object_store_memory": NODE_OBJECT_STORE,
                                "node_ip_address": "127.0.0.1"}  # fmt: skip
        head = {**node, "resources": {hosts[0]: 1}, "temp_dir": str(base),
                "include_dashboard": False, "_system_config": HEALTH_CHECK}  # fmt: skip
        before = ray_processes(ray)
        cluster: Any = None
        with sigterm_kept(ray):
            try:
                cluster = Cluster(initialize_head=True, head_node_args=head)
                check_interrupted()
                for host in hosts[1:]:
                    cluster.add_node(**node, resources={host: 1})
                    check_interrupted()
                with driver_signals_kept(ray):
                    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
            except BaseException:
                # Interrupted anywhere (a node half started, that no node object holds yet):
                # every process it started goes, then Ray's bookkeeping of the nodes it has.
                with signals_held():
                    ray.shutdown()
                    stop_strays(ray, before)
                    if cluster is not None:
                        stop_nodes(cluster)
                    shutil.rmtree(base, ignore_errors=True)
                raise
        return cls(hosts, cluster, base)

    @classmethod
    def join(cls, hosts: Sequence[str], address: str) -> RayCluster:
        """The running cluster at ``address`` (``--ray-address``): streamscope neither starts
        nor stops it. A process already connected to it keeps its connection. An address
        where no cluster answers within ``JOIN_TIMEOUT_S`` is a ConfigError."""
        ray = _ray()  # first: without Ray, whether the address answers does not matter
        if ray.is_initialized():
            return cls(hosts, None, None, owns_driver=False)
        check_address(address)  # before joining: Ray would retry for minutes
        try:
            with sigterm_kept(ray), driver_signals_kept(ray):
                ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot join the Ray cluster at {address}: {exc}") from None
        return cls(hosts, None, None)

    def _nodes(self) -> dict[str, str]:
        """Host name -> node id, for the live nodes that carry a host's resource."""
        out: dict[str, str] = {}
        for n in self._ray.nodes():
            if n.get("Alive"):
                for name in n.get("Resources", {}):
                    if name in self.hosts:
                        out[name] = n["NodeID"]
        return out

    def lost(self) -> list[str]:
        """The hosts whose node the cluster no longer counts alive, in ``hosts`` order. Each
        is found by its node's own id (``node_of``), never by what ran there."""
        alive = {n["NodeID"] for n in self._ray.nodes() if n.get("Alive")}
        return [h for h in self.hosts if self._node_ids[h] not in alive]

    @property
    def address(self) -> str:
        """The address to join this cluster at (``--ray-address``)."""
        if self._cluster is not None:
            return str(self._cluster.address)
        return str(self._ray.get_runtime_context().gcs_address)

    @property
    def directory(self) -> Path | None:
        """Where a cluster started here keeps its files (None: joined, or closed)."""
        return self._dir

    def node_of(self, host: str) -> str:
        """The id of the node ``host``'s stages run on."""
        return self._node_ids[host]

    def on_node(self, host: str) -> dict[str, Any]:
        """Actor options that place an actor on ``host``'s node (a sliver of its resource)."""
        return {"resources": {host: 0.001}, "num_cpus": 0}

    def on_this_node(self) -> dict[str, Any]:
        """Actor options that place an actor on this process's own node (the monitor's)."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = self._ray.get_runtime_context().get_node_id()
        return {
            "scheduling_strategy": NodeAffinitySchedulingStrategy(node, soft=False),
            "num_cpus": 0,
        }

    def close(self) -> None:
        if not self._owns_driver:
            return
        if self._ray.is_initialized():
            self._ray.shutdown()
        if self._cluster is not None:
            stop_nodes(self._cluster)
            self._cluster = None
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def check_address(address: str, timeout_s: float = JOIN_TIMEOUT_S) -> None:
    """ConfigError unless a Ray cluster answers at ``address`` (``HOST:PORT``, or
    ``ray://HOST:PORT``; ``auto`` is left to Ray) within ``timeout_s``: a connection is accepted
    and its server speaks gRPC (HTTP/2), as a cluster's GCS and Ray client server do."""
    if address in ("auto", "local"):
        return
    rest = address.removeprefix("ray://")
    host, _, port_text = rest.rpartition(":")
    host = host.strip("[]")
    if not host or not port_text.isdigit():
        raise ConfigError(
            f"--ray-address {address!r} is not an address: give HOST:PORT (the head node's GCS "
            "port, 6379 unless it was started with another) or ray://HOST:PORT"
        )
    deadline = time.monotonic() + timeout_s
    try:
        with socket.create_connection((host, int(port_text)), timeout=timeout_s) as conn:
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            conn.sendall(_H2_PREFACE)
            head = _read(conn, 9)
    except OSError as exc:
        if isinstance(exc, TimeoutError):
            reason = f"no answer within {timeout_s:g} s"
        else:
            reason = (exc.strerror or str(exc)).lower()
        raise ConfigError(
            f"nothing answered at the Ray address {address} ({reason}): start the cluster's "
            "head there (ray start --head), or leave --ray-address out to start a cluster on "
            "this machine"
        ) from None
    if len(head) < 9 or head[3] != _H2_SETTINGS:
        raise ConfigError(
            f"what answered at the Ray address {address} is not a Ray cluster (it does not "
            "speak gRPC): give the head node's GCS port (6379 unless it was started with "
            "another), not its dashboard's"
        )


def _read(conn: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes: fewer when the peer closes first."""
    got = b""
    while len(got) < n:
        part = conn.recv(n - len(got))
        if not part:
            break
        got += part
    return got
