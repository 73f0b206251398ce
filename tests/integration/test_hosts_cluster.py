"""The hosts a run spreads over: a Ray cluster of named nodes on this machine, started and
stopped by streamscope, each host's actors on its own node, nothing left running after."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from streamscope.core.errors import ConfigError
from streamscope.runtime.cluster import RayCluster

HOSTS = ("node-a", "node-b", "node-c")


def _ray_processes() -> list[str]:
    """Ray's own processes among this process's descendants."""
    out = []
    for p in psutil.Process(os.getpid()).children(recursive=True):
        try:
            line = " ".join(p.cmdline())
        except psutil.NoSuchProcess:
            continue
        if "raylet" in line or "gcs_server" in line or "ray::" in line or "default_worker" in line:
            out.append(f"{p.pid} {line[:120]}")
    return out


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    """One cluster of ``HOSTS`` for the module's tests (it takes seconds to start); when they
    are done, it must be gone without a process or a file left."""
    with RayCluster.start(HOSTS) as started:
        files = started.directory
        assert files is not None and files.is_dir()
        assert _ray_processes()  # the nodes are processes of this machine
        yield started
    assert not started.ray.is_initialized()
    assert not files.exists() and started.directory is None
    left = _ray_processes()
    for _ in range(50):  # the nodes' processes end as they are told to
        if not left:
            break
        psutil.wait_procs(psutil.Process(os.getpid()).children(recursive=True), timeout=0.1)
        left = _ray_processes()
    assert left == []


def test_each_host_is_a_node_of_its_own(cluster: RayCluster) -> None:
    def _node() -> str:  # local: sent to the nodes by value (they cannot import this file)
        import ray

        return str(ray.get_runtime_context().get_node_id())

    ray = cluster.ray
    where = ray.remote(_node)
    placed = {h: ray.get(where.options(**cluster.placement(h)).remote()) for h in HOSTS}
    assert placed == {h: cluster.node_of(h) for h in HOSTS}
    assert len(set(placed.values())) == len(HOSTS)


def test_a_directory_too_long_for_rays_sockets_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="too long for Ray's sockets"):
        RayCluster.start(HOSTS, tmp_path / ("x" * 60))


@pytest.mark.parametrize("hosts", [(), ("a", "a")])
def test_hosts_must_be_distinct_names(hosts: tuple[str, ...]) -> None:
    with pytest.raises(ConfigError, match="distinct names"):
        RayCluster.start(hosts)


def test_each_hosts_clock_is_bounded_by_round_trips_over_the_cluster(cluster: RayCluster) -> None:
    """Hosts given clocks the fit is not told (a rate error, an offset, drift, a tick): round
    trips over the cluster's calls fit them, and the bounds hold the truth."""
    from streamscope.runtime.hostclock import HostClocks
    from streamscope.timebase.calibration import fit
    from streamscope.timebase.emulated import check_truth

    specs = {
        "node-b": "rate_ppm=40,offset_s=2.5,drift_ppb_s=10,tick_ns=3",
        "node-c": "rate_ppm=-25,offset_s=-7.25,tick_ns=16",
    }
    clocks = HostClocks(cluster, specs)
    for host in HOSTS:
        ex = clocks.exchange(host, 300)
        f = fit(ex, "hull")
        truth = clocks.truth(host)
        rtt = float(np.median(ex.t3_ns - ex.t1_ns))
        if truth is None:  # the host's own monotonic clock: the reference itself
            mid = (ex.t1_ns + ex.t3_ns) // 2
            assert np.all(np.abs(ex.t2_ticks - mid) <= (ex.t3_ns - ex.t1_ns))
            continue
        check = check_truth(f, truth)
        assert check.inside, (host, check, rtt)
        assert f.bound_width_ns() <= rtt, (host, f.bound_width_ns(), rtt)


def test_a_channel_between_hosts_is_bounded_ordered_and_ends(cluster: RayCluster) -> None:
    """A source on one host puts 200 items into a channel of capacity 4 whose queue is on the
    consumer's host; a slower consumer there gets them in order, then the end of the stream; the
    channel never holds more than its capacity (the producer waits)."""
    from streamscope.runtime.hostchannel import EndOfStream, HostChannel

    def produce(ch: HostChannel, n: int) -> list[int]:
        seen = []
        for i in range(n):
            ch.put(i)
            seen.append(ch.qsize())
        ch.close()
        return seen

    def consume(ch: HostChannel) -> list[int]:
        import time

        got = []
        while not isinstance(item := ch.get(), EndOfStream):
            got.append(item)
            time.sleep(0.001)
        return got

    ray = cluster.ray
    ch = HostChannel(cluster, 4, "node-c")
    sizes = ray.remote(produce).options(**cluster.placement("node-a")).remote(ch, 200)
    items = ray.remote(consume).options(**cluster.placement("node-c")).remote(ch)
    got, seen = ray.get(items), ray.get(sizes)
    ch.shutdown()
    assert got == list(range(200))
    assert max(seen) <= 4 and max(seen) == 4  # full at times: the producer waited
