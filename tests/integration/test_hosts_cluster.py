"""The hosts a run spreads over: a Ray cluster of named nodes on this machine, started and
stopped by streamscope, each host's actors on its own node, nothing left running after."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import streamscope as ss
from oracles import benchmark, ray_processes, ray_processes_left
from streamscope.core.errors import ConfigError
from streamscope.runtime.hosts.cluster import RayCluster

HOSTS = ("node-a", "node-b", "node-c")
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster() -> Iterator[RayCluster]:
    """One cluster of ``HOSTS`` for the module's tests (it takes seconds to start); when they
    are done, it must be gone without a process or a file left."""
    with RayCluster.start(HOSTS) as started:
        files = started.directory
        assert files is not None and files.is_dir()
        assert ray_processes()  # the nodes are processes of this machine
        yield started
    assert not started.ray.is_initialized()
    assert not files.exists() and started.directory is None
    assert ray_processes_left() == []


def test_each_host_is_a_node_of_its_own(cluster: RayCluster) -> None:
    def _node() -> str:  # local: sent to the nodes by value (they cannot import this file)
        import ray

        return str(ray.get_runtime_context().get_node_id())

    ray = cluster.ray
    where = ray.remote(_node)
    placed = {h: ray.get(where.options(**cluster.on_node(h)).remote()) for h in HOSTS}
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
    from streamscope.runtime.hosts.clock import HostClocks
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
    from streamscope.runtime.hosts.channel import EndOfStream, HostChannel

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
            # Slower than a put (a call, ~0.6 ms; a few ms beside a busy core): it fills.
            time.sleep(0.005)
        return got

    ray = cluster.ray
    ch = HostChannel(cluster, 4, "node-c")
    sizes = ray.remote(produce).options(**cluster.on_node("node-a")).remote(ch, 200)
    items = ray.remote(consume).options(**cluster.on_node("node-c")).remote(ch)
    got, seen = ray.get(items), ray.get(sizes)
    ch.shutdown()
    assert got == list(range(200))
    assert max(seen) <= 4 and max(seen) == 4  # full at times: the producer waited


ITEMS = 600
FRAME_NS = 500_000_000
#: ``gather -> sink``'s capacity in ``examples/hosts.py``.
GATHERED = 8


def _stamps(truth_file: Path, stage: str) -> Any:
    """When ``stage`` had handed on each item (its code resumed after the put), by item."""
    rows = np.load(truth_file.with_suffix(f".{stage}.npy"))
    if rows.ndim == 1:  # the source's: by position
        return rows
    out = np.zeros(ITEMS, dtype=np.int64)
    out[rows[:, 0]] = rows[:, 1]
    return out


def _after_previous(items: Any, handed: Any) -> Any:
    """For each of one consumer's items, in the order it took them: when it had handed on the
    item before (its get of this one came after that), 0 for its first."""
    return np.concatenate(([0], handed[items[:-1]])) if len(items) else items


def _latency_against_truth(run: ss.Run, truth: Any, truth_file: Path, w: int) -> int:
    """``latency(source -> work{w})`` frame by frame against the application's stamps around
    each put and get (``_clocktruth.check``: every latency lies between its stamps' least and
    most, the frame's figures between those of the least and the most); the frames checked."""
    qid = next(q.id for q in run.queries if q.metric == "latency")
    sel = truth["worker"] == w
    order = np.argsort(truth["taken_ns"][sel], kind="stable")
    items = truth["item"][sel][order]
    made, taken = truth["made_ns"][sel][order], truth["taken_ns"][sel][order]
    handed = _stamps(truth_file, "source")[items]
    # The worker's get of an item came after its put and after it had handed the last one on.
    got_earliest = np.maximum(made, _after_previous(items, _stamps(truth_file, f"work{w}")))
    checked, missed, worst, negative = benchmark("_clocktruth").check(
        made.astype(np.float64), got_earliest.astype(np.float64), run.meta.t0_host_ns, FRAME_NS,
        1.0, run.results(qid, f"source -> work{w}"), taken.astype(np.float64),
        handed.astype(np.float64),
    )  # fmt: skip
    print(f"work{w}: {checked} frames, {missed} outside by up to {worst / 1e3:.1f} us")
    assert missed == 0 and negative == 0, (w, checked, missed, worst, negative)
    return checked


def _gathered_times(truth: Any, truth_file: Path) -> tuple[Any, Any, Any, Any]:
    """``gather -> sink``, in the sink's order (its FIFO's): each item's put between its
    earliest and latest, and its get likewise, from the application's stamps alone. A put
    came after gather's stamp before it and, the channel holding ``GATHERED`` at most, after
    the get of the item that many places ahead; a get came after the put and after the sink
    was done with the item before; each before the stamp that follows it."""
    put_latest = _stamps(truth_file, "gather")[truth["item"]]
    got_latest = truth["got_ns"]
    put_earliest = truth["gathered_ns"].copy()
    got_earliest = np.zeros_like(got_latest)
    done_before = np.concatenate(([0], truth["done_ns"][:-1]))
    for k in range(len(got_latest)):  # each bound leans on one GATHERED places ahead
        if k >= GATHERED:
            put_earliest[k] = max(put_earliest[k], got_earliest[k - GATHERED])
        got_earliest[k] = max(put_earliest[k], done_before[k])
    return put_earliest, put_latest, got_earliest, got_latest


def _occupancy_against_truth(
    run: ss.Run, truth: Any, truth_file: Path
) -> list[tuple[int, float, float, float]]:
    """Per frame of ``occupancy(gather -> sink)``: (frame, monitored mean, the least and the
    most time-weighted mean the application's stamps allow). Both ends are on node-c, whose
    clock times the items' stays as they are; only where its frame lies on the virtual
    timeline is uncertain, by up to the frame's uncertainty at either edge."""
    from streamscope.aggregate.points import ScalarPoint

    qid = next(q.id for q in run.queries if q.text.startswith("occupancy(gather -> sink)"))
    t0 = run.meta.t0_host_ns
    put_lo, put_hi, got_lo, got_hi = (t - t0 for t in _gathered_times(truth, truth_file))
    rows = []
    for fr in run.results(qid, "gather -> sink"):
        if fr.covered_ns == 0:
            continue  # after node-c's end: nothing seen there
        a, b = fr.t_start_ns, fr.t_start_ns + fr.covered_ns  # the host's last frame ends early
        u = float(fr.point("uncertainty_ns").value or 0.0)  # type: ignore[union-attr]

        def held(enter: Any, leave: Any, a: float, b: float) -> float:
            return float(np.sum(np.clip(np.minimum(leave, b) - np.maximum(enter, a), 0, None)))

        least = held(put_hi, got_lo, a + u, b - u) / (b - a + 2 * u)
        # (a frame shorter than its edges' uncertainty may be a sliver: as full as it can be)
        most = held(put_lo, got_hi, a - u, b + u) / (b - a - 2 * u) if b - a > 2 * u else GATHERED
        mean = next(p.value for p in fr.points if isinstance(p, ScalarPoint) and p.stat == "mean")
        rows.append((fr.frame, float(mean or 0.0), least, most))
    return rows


def test_a_pipeline_over_three_hosts_against_its_own_truth(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """``examples/hosts.py`` from the command line on this cluster (``--ray-address``): a
    source on node-a, two workers on node-b, a sink on node-c, each host's clock emulated and
    not told. Throughput per channel is exact against the items the application counted; the
    latency between hosts is inside its bounds frame by frame; the network between two hosts
    is a virtual queue whose estimate is checked."""
    out, truth_file = tmp_path / "hosts.duckdb", tmp_path / "truth.npz"
    cmd = [sys.executable, "-m", "streamscope", "run", str(ROOT / "examples" / "hosts.py"),
           "--out", str(out), "--quiet", "--ground-truth", "--ray-address", cluster.address,
           "--", "--items", str(ITEMS), "--truth", str(truth_file)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    truth = np.load(truth_file)
    assert sorted(truth["item"].tolist()) == list(range(ITEMS))
    with ss.load(out) as run:
        res = run.table("resource")
        kinds = dict(zip(res["name"], zip(res["kind"], res["clock_domain"], strict=True),
                         strict=True))  # fmt: skip
        for host in HOSTS:
            assert kinds[host] == ("host", host)  # every host a timezone of its own
        fitted = set(run.table("clock_fit")["domain"])
        assert fitted == set(HOSTS)
        # Throughput: every item the application saw, on the channel it took.
        qid = next(q.id for q in run.queries if q.metric == "throughput")
        for w in (0, 1):
            expected = int((truth["worker"] == w).sum())
            for target in (f"source -> work{w}", f"work{w} -> gather"):
                counted = sum(  # a rate over the time each frame covered
                    p.value * fr.covered_ns / 1e9
                    for fr in run.results(qid, target)
                    for p in fr.points
                    if getattr(p, "stat", "") == "mean" and fr.covered_ns
                )
                assert round(counted) == expected, (target, counted, expected)
            assert _latency_against_truth(run, truth, truth_file, w) >= 2
        # The channel inside node-c (gather -> sink) against the application's stamps on
        # either side of it: its time-weighted occupancy per frame.
        rows = _occupancy_against_truth(run, truth, truth_file)
        assert len(rows) >= 2
        for frame, monitored, least, most in rows:
            print(f"gather -> sink frame {frame}: {monitored:.4f} in [{least:.4f}, {most:.4f}]")
            assert least - 1e-9 <= monitored <= most + 1e-9, (frame, monitored, least, most)
        # Each host's agent reduced its stages' states to frames: every frame has a duty, and
        # not one state record crossed the network (the flight recorder kept none).
        qid = next(q.id for q in run.queries if q.metric == "state")
        for stage in ("source", "work0", "work1", "gather", "sink"):
            duties = [p for fr in run.results(qid, stage) for p in fr.points if p.stat == "duty"]
            assert duties, stage
        states = [p.id for p in run.topology.probes if p.kind == "state"]
        _, rows = run.sql(
            f"SELECT count(*) FROM record WHERE probe_id IN ({', '.join(map(str, states))})"
        )
        assert rows[0][0] == 0
        # Everything else too was reduced by the hosts themselves: throughput at each
        # channel's head, the occupancy of the channel inside node-c, the latency between
        # hosts (paired on node-b from the insertion ticks its items brought): not one record
        # of any channel's taps crossed; the file's records are none at all. Each frame says
        # how far its edges (and a latency's insertions) may lie from their virtual times.
        _, rows = run.sql("SELECT count(*) FROM record")
        assert rows[0][0] == 0
        qid = next(q.id for q in run.queries if q.metric == "throughput")
        # An item left the channel (its removal recorded) between the earliest and the latest
        # its stamps allow (``_gathered_times``): a thread put aside between the two moments
        # (a busy machine) puts them far apart.
        _, _, left, got = (t - run.meta.t0_host_ns for t in _gathered_times(truth, truth_file))
        for fr in run.results(qid, "gather -> sink"):
            if fr.covered_ns == 0:
                continue  # after node-c's end: nothing seen there
            unc = fr.point("uncertainty_ns").value  # type: ignore[union-attr]
            counted = round(fr.point("mean").value * fr.covered_ns / 1e9)  # type: ignore[union-attr]
            end = fr.t_start_ns + fr.covered_ns
            surely = int(((left >= fr.t_start_ns + unc) & (got < end - unc)).sum())
            maybe = int(((got >= fr.t_start_ns - unc) & (left < end + unc)).sum())
            print(f"gather -> sink frame {fr.frame}: {counted} items in [{surely}, {maybe}]")
            assert surely <= counted <= maybe, (fr.frame, counted, surely, maybe)
        # The report draws each host's stages in a frame of its own, named after it; the
        # export gives each host a process (a group of tracks) on the one timeline.
        from streamscope.export import export_run
        from streamscope.report.html import render

        page, _ = render(run)
        for host in HOSTS:
            assert f'class="ss-host" data-host="{host}"' in page
        export_run(run, "chrome", tmp_path / "hosts.json")
        events = json.loads((tmp_path / "hosts.json").read_text())["traceEvents"]
        processes = {e["pid"]: e["args"]["name"] for e in events if e.get("name") == "process_name"}
        threads = {e["args"]["name"].split()[0]: processes[e["pid"]]
                   for e in events if e.get("name") == "thread_name"}  # fmt: skip
        assert threads == {"source": "node-a [host, clock node-a]",
                           "work0": "node-b [host, clock node-b]",
                           "work1": "node-b [host, clock node-b]",
                           "gather": "node-c [host, clock node-c]",
                           "sink": "node-c [host, clock node-c]"}  # fmt: skip
        # The link between node-a and node-b: a virtual queue, estimated and checked.
        (vq,) = run.virtual_queues()
        assert vq["target"] == "source -> work0" and vq["model"] == "tandem"
        print({k: vq[k] for k in ("verdict", "w1_items", "w1_truth_items", "w1_truth_ideal_items",
                                  "renewal_verdict")})  # fmt: skip
        assert vq["frames"] >= 3
        # An i.i.d. source (exponential gaps): the self-check does not reject the model (the
        # run's test taken at 0.1 % here, where its verdict uses 5 %: one run in twenty would
        # fail at 5 % by chance alone), and the estimate is nearer the truth than the ideal
        # queue's. The network's own timing is what the model cannot know: each link says
        # how many batches came after their time.
        assert vq["p_value"] > 0.001, vq
        assert vq["w1_truth_items"] < vq["w1_truth_ideal_items"]
        links = run.table("link")
        assert sorted(links["channel"]) == sorted(run.topology.link_names)
        assert all(0 <= late <= sent for late, sent in zip(links["late"], links["transfers"],
                                                           strict=True))  # fmt: skip
        assert min(links["transfers"]) > 0
        # What each host's agent sent the monitor, and what it kept (its stages' states).
        traffic = run.table("host")
        assert sorted(traffic["host"]) == sorted(HOSTS)
        assert min(traffic["bytes"]) > 0 and min(traffic["messages"]) > 0
        assert min(traffic["kept_records"]) > 0


def test_a_path_across_three_hosts_is_followed_inside_its_bounds(
    cluster: RayCluster, tmp_path: Path
) -> None:
    """``latency(source ~> sink)`` over the cluster: the tags ride in the links' batches from
    node-a through node-b to node-c, each host on its own emulated clock. The arrivals counted
    are the application's, and per frame the median lies within the frame's bounds of what the
    application's stamps around the source's put and the sink's get allow."""
    out, truth_file = tmp_path / "path.duckdb", tmp_path / "truth.npz"
    q = "latency(source ~> sink): mean, p50, p99, count every 500ms"
    cmd = [sys.executable, "-m", "streamscope", "run", str(ROOT / "examples" / "hosts.py"),
           "--out", str(out), "--quiet", "--ray-address", cluster.address, "--query", q,
           "--", "--items", str(ITEMS), "--truth", str(truth_file)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    truth = np.load(truth_file)
    with ss.load(out) as run:
        frames = run.results(0, "source ~> sink")
        t0 = run.meta.t0_host_ns
    # Each item's path from the source's put (between its stamps around it) to the sink's get
    # (between the earliest its stamps allow and the sink's own stamp after it).
    _, _, got_earliest, got_latest = _gathered_times(truth, truth_file)
    handed = _stamps(truth_file, "source")[truth["item"]]
    checked, missed, worst, negative = benchmark("_clocktruth").check(
        truth["made_ns"].astype(np.float64), got_earliest.astype(np.float64), t0, FRAME_NS, 1.0,
        frames, got_latest.astype(np.float64), handed.astype(np.float64),
    )  # fmt: skip
    print(f"{checked} frames, {missed} outside by up to {worst / 1e3:.1f} us")
    assert checked >= 2
    assert missed == 0 and negative == 0, (checked, missed, worst, negative)
    counted = sum(float(fr.point("count").value or 0.0) for fr in frames)  # type: ignore[union-attr]
    # Every item arrived once, and each arrival was counted (the source tags every item: its
    # 600 are far fewer than the sampler allows).
    assert counted == ITEMS
