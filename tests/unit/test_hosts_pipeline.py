"""Stages on hosts, as a pipeline sees them before anything runs: the resource, the channels
that cross hosts (network links), what may be mixed with hosts and what is refused."""

from __future__ import annotations

import math

import pytest

import streamscope as ss
from streamscope.pipeline.run.runner import Runner
from streamscope.runtime.options import RunOptions


def _three(mid: object = "thread") -> ss.Pipeline:
    p = ss.Pipeline("h")
    p.add("src", range(10), resource=ss.Host("node-a", clock="rate_ppm=30,offset_s=2"))
    p.add("mid", lambda x: x, resource=mid)  # type: ignore[arg-type]
    p.add("dst", lambda x: None, resource=ss.Host("node-c"))
    p.connect("src", "mid", capacity=4)
    p.connect("mid", "dst", capacity=8)
    return p


def test_a_host_is_a_timezone_of_its_own_and_its_channels_are_network_links() -> None:
    p = _three()
    p.validate()
    assert p.hosts() == ("node-a", "node-c")
    topo = p.topology()
    kinds = {r.name: (r.kind, r.clock_domain) for r in topo.resources}
    assert kinds["node-a"] == ("host", "node-a") and kinds["node-c"] == ("host", "node-c")
    assert kinds["main"] == ("thread", "host")
    links = {c.name: c for c in topo.channels}
    for name in ("src -> mid", "mid -> dst"):
        ch = links[name]
        assert ch.is_link
        assert ch.bulk_size == min(16, ch.capacity) and ch.transfer_ns == 5e6
        assert ch.latency_ns == 5e6 and ch.timeout_ns == 2e6


def test_a_host_s_link_is_the_consumer_s_network() -> None:
    p = ss.Pipeline("h")
    slow = ss.Host("b", transfer_us=5000, latency_us=100, timeout_us=None, bulk_size=4)
    p.add("src", range(3), resource=ss.Host("a"))
    p.add("dst", lambda x: None, resource=slow)
    p.connect("src", "dst", capacity=32)
    (ch,) = p.topology().channels
    assert (ch.bulk_size, ch.transfer_ns, ch.latency_ns, ch.timeout_ns) == (4, 5e6, 1e5, None)
    assert slow.link is not None and math.isinf(slow.link.timeout_ns)


def test_stages_of_one_host_share_a_plain_channel() -> None:
    p = _three(ss.Host("node-c"))
    links = {c.name: c.transport for c in p.topology().channels}
    assert links == {"src -> mid": "link", "mid -> dst": "thread"}


@pytest.mark.parametrize("other", [ss.Process("p"), ss.EmulatedDevice("d")])
def test_hosts_mix_with_the_pipeline_s_own_threads_not_forked_processes(other: object) -> None:
    with pytest.raises(ss.PipelineError, match="places its other stages in its own process"):
        _three(other).validate()


def test_function_tracing_of_a_host_s_stage_is_refused() -> None:
    p = _three()
    p.trace(stages=["src"])
    with pytest.raises(ss.PipelineError, match="function tracing runs in the pipeline's own"):
        p.validate()


def test_a_bad_host_clock_is_refused_with_the_key() -> None:
    with pytest.raises(ss.ConfigError, match="rate"):
        ss.Host("a", clock="rate=3")


def test_a_runner_without_a_cluster_refuses_hosts() -> None:
    with pytest.raises(ss.PipelineError, match="needs a cluster"):
        Runner(_three(), (), None, None)


def test_a_program_s_run_refuses_a_ray_address() -> None:
    with pytest.raises(ss.ConfigError, match="ray_address cannot apply"):
        RunOptions(ray_address="127.0.0.1:6379").refuse_pipeline_only("a program")
