"""Declared probes (samplers, counters, timers), per-iteration durations and the run's own
overhead, through real runs: every figure is checked against what the stage really did."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import streamscope as ss
from streamscope.store.run import STACK_SAMPLING

N = 400


class Source:
    """Samples, counts and times its own work; remembers what it did, for the oracle."""

    def __init__(self) -> None:
        self.samples: list[int] = []
        self.counted = 0

    def generate(self) -> Iterator[int]:
        v, n, t = ss.probe("v"), ss.probe("n"), ss.probe("t")
        for i in range(N):
            value = (i * 7919) % 101
            v.sample(value)
            self.samples.append(value)
            n.count(i % 3)
            self.counted += i % 3
            t.start()
            x = 0
            for k in range(200):
                x += k
            t.stop()
            yield i


def _pipeline(resource: Any = "thread", sink_s: float = 0.0005) -> tuple[ss.Pipeline, Source]:
    src = Source()
    p = ss.Pipeline("probes")
    p.add("src", src, resource=resource)

    def sink(x: int) -> None:
        time.sleep(sink_s)

    p.add("sink", sink)
    p.connect("src", "sink", capacity=2)
    p.probe("src", "v")
    p.probe("src", "n", "counter")
    p.probe("src", "t", "timer")
    return p, src


def _stats(run: ss.Run, text: str) -> dict[str, float]:
    q = next(q for q in run.queries if q.text == text)
    _, rows = run.sql(f"SELECT stat, value FROM stat WHERE query_id = {q.id} AND value IS NOT NULL")
    out: dict[str, float] = {}
    for stat, value in rows:
        if stat in ("count", "sum"):
            out[stat] = out.get(stat, 0.0) + value
        elif stat == "max":
            out[stat] = max(out.get(stat, value), value)
    return out


QUERIES = [
    "sample(src.v): count, mean, max every 100ms",
    "counter(src.n): sum every 100ms",
    "timer(src.t): count, mean every 100ms",
]


@pytest.mark.parametrize("where", ["thread", "process"])
def test_declared_probes_count_exactly_what_the_stage_did(tmp_path: Path, where: str) -> None:
    p, src = _pipeline("thread" if where == "thread" else ss.Process("side"))
    out = tmp_path / "run.duckdb"
    res = ss.run(p, QUERIES, ss.RunOptions(out=out, frame_ns=100_000_000))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        s = _stats(run, QUERIES[0])
        assert s["count"] == N
        assert s["max"] == 100
        c = _stats(run, QUERIES[1])
        # In a process stage the oracle object is the child's copy: recompute it.
        assert c["sum"] == sum(i % 3 for i in range(N))
        t = _stats(run, QUERIES[2])
        assert t["count"] == N
        mean = run.sql(
            "SELECT sum(s.value * f.n) / sum(f.n) FROM stat s JOIN (SELECT query_id, target, "
            "frame, value AS n FROM stat WHERE stat = 'count') f USING (query_id, target, frame) "
            "WHERE s.stat = 'mean' AND s.query_id = 0"
        )[1][0][0]
        assert mean == pytest.approx(np.mean([(i * 7919) % 101 for i in range(N)]))
        doc = run.to_json()
        for probe in doc["probes"]:
            assert probe["dropped"] == 0
        by_target = {pr["target"]: pr for pr in doc["probes"]}
        assert by_target["src.v"]["recorded"] == N
        assert by_target["src.t"]["recorded"] == N
    if where == "thread":
        assert src.samples == [(i * 7919) % 101 for i in range(N)]


def test_a_probe_no_query_uses_records_nothing(tmp_path: Path) -> None:
    p, _ = _pipeline()
    out = tmp_path / "run.duckdb"
    res = ss.run(p, ["counter(src.n): sum every 100ms"], ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        # Only the queried probe, beside the stages' state trackers (always on: stalls) and the
        # process's stack sampler (on unless --no-stacks).
        kinds = [pr.kind for pr in run.topology.probes if pr.kind not in ("state", "stacks")]
        assert kinds == ["counter"]


def test_per_iteration_output_wait_matches_the_blocked_time(tmp_path: Path) -> None:
    """Each iteration's time in output calls, binned in fixed-width bins (Curreri et al. 2010, Fig. 11),
    each in the bin that holds it, adds up to the time the state probe saw the stage blocked on
    output (the sink takes 2 ms an item and the channel holds 2: most puts wait)."""
    p, _ = _pipeline(sink_s=0.002)
    qs = [
        "output_wait(src): count, sum, histogram(range=0..5ms, width=250us) every 100ms",
        "iteration(src): count every 100ms",
        "input_wait(sink): count every 100ms",
        "state(src): duty every 100ms",
    ]
    out = tmp_path / "run.duckdb"
    res = ss.run(p, qs, ss.RunOptions(out=out, frame_ns=100_000_000))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        ow = _stats(run, qs[0])
        assert ow["count"] == N
        assert _stats(run, qs[1])["count"] == N
        assert _stats(run, qs[2])["count"] == N
        _, hist = run.sql(
            "SELECT lo, hi, sum(weight) FROM histogram WHERE query_id = 0 GROUP BY lo, hi"
        )
        assert sum(w for _, _, w in hist) == N  # every iteration in exactly one bin
        # Each wait in the bin that holds it: their sum lies between the bins' lower edges and
        # their upper ones (a bin open at one end bounds that side only).
        least = sum((lo or 0.0) * w for lo, _, w in hist)
        most = (
            sum(hi * w for _, hi, w in hist) if all(hi is not None for _, hi, _ in hist) else None
        )
        assert least <= ow["sum"] and (most is None or ow["sum"] <= most), (least, ow, most)
        _, duty = run.sql(
            "SELECT sum(d.value * (f.covered_ns)) FROM stat d JOIN frame f USING (query_id, "
            "target, frame) WHERE d.query_id = 3 AND d.stat = 'duty.blocked_out'"
        )
        blocked_ns = duty[0][0]
        assert ow["sum"] == pytest.approx(blocked_ns, rel=0.1)


def test_overhead_is_recorded_per_stage(tmp_path: Path) -> None:
    p, _ = _pipeline()
    out = tmp_path / "run.duckdb"
    qs = [*QUERIES, "occupancy(src -> sink): mean every 100ms", "state(sink): duty every 100ms"]
    res = ss.run(p, qs, ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        rows = {r["stage"]: r for r in run.overhead()}
        _, kept = run.sql("SELECT sum(recorded) + sum(dropped) FROM drops")
        assert sum(r["events"] for r in rows.values()) == kept[0][0]
        # src: N samples + N timer intervals + N puts + the counter's flushes; sink: N gets
        # and its state changes.
        assert rows["src"]["events"] >= 3 * N
        assert rows["sink"]["events"] >= N
        for r in rows.values():
            if r["stage"] == STACK_SAMPLING:  # its own thread's: no stage's
                assert r["est_probe_ns"] > 0 and r["cpu_ns"] is None
                continue
            assert r["est_probe_ns"] > 0
            assert 0 < r["fraction"] < 0.5
            # Measured while the run went on: each stage thread's CPU, its own code's share
            # (sampled), and the runner's rest.
            assert r["cpu_ns"] > 0
            # (own code's CPU is part of the thread's: an estimate past it, from a handful of
            # timed items one of which cost a millisecond more, is held to it)
            assert r["user_ns"] is not None and 0 < r["user_ns"] <= r["cpu_ns"]
            assert r["runner_ns"] is not None and 0 <= r["runner_fraction"] <= 1
        assert rows["sink"]["items"] == N
        assert rows["src"]["items"] == N
        mon = run.monitor_cost()
        assert mon["cpu_ns"] > 0 and mon["lag_max_ns"] is not None
        shown = subprocess.run(
            [sys.executable, "-m", "streamscope", "show", str(out)],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        assert "what monitoring cost" in shown.stdout
        assert "monitor process:" in shown.stdout
        doc = json.loads(
            subprocess.run(
                [sys.executable, "-m", "streamscope", "show", str(out), "--json"],
                capture_output=True, text=True, check=True,
            ).stdout
        )  # fmt: skip
        assert {r["stage"] for r in doc["overhead"]} == {"src", "sink", STACK_SAMPLING}


def test_centralized_storage_drops_under_contention_and_counts_every_sample(
    tmp_path: Path,
) -> None:
    """Two samplers write at every cycle into one single-port storage: half their samples
    find the port busy; with distributed storage none is lost. Kept + dropped = taken."""

    def source() -> Iterator[int]:
        a, b = ss.probe("a"), ss.probe("b")
        for c in range(1000):
            a.sample(c, cycle=c)
            b.sample(-c, cycle=c)
            yield c

    results = {}
    for scheme in ("centralized", "distributed"):
        p = ss.Pipeline("contention")
        p.add("src", source)
        p.add("sink", lambda x: None)
        p.connect("src", "sink")
        p.probe("src", "a", storage=scheme)
        p.probe("src", "b", storage=scheme)
        p.probe_storage("thread", ports=1)
        out = tmp_path / f"{scheme}.duckdb"
        res = ss.run(p, ["sample(src.*): count every 100ms"], ss.RunOptions(out=out))
        assert res.status == "completed", res.error
        with ss.load(out) as run:
            results[scheme] = {pr["target"]: pr for pr in run.to_json()["probes"]}
    for scheme, probes in results.items():
        for pr in probes.values():
            if pr["kind"] == "sampler":
                assert pr["recorded"] + pr["dropped"] == 1000, (scheme, pr)
    assert all(pr["dropped"] == 0 for pr in results["distributed"].values())
    lost = sum(pr["dropped"] for pr in results["centralized"].values() if pr["kind"] == "sampler")
    # One port, two samples per cycle, a hold register each: one write per cycle.
    assert lost == pytest.approx(1000, abs=2)


def test_probe_mistakes_are_clear_errors(tmp_path: Path) -> None:
    p = ss.Pipeline("bad")
    p.add("src", range(3))
    p.add("sink", print)
    p.connect("src", "sink")
    with pytest.raises(ss.PipelineError, match="unknown stage 'nope'"):
        p.probe("nope", "x")
    with pytest.raises(
        ss.PipelineError, match="kind must be one of sampler, counter, timer, global"
    ):
        p.probe("src", "x", "histogram")
    with pytest.raises(ss.PipelineError, match="only samplers can use centralized storage"):
        p.probe("src", "x", "counter", storage="centralized")
    with pytest.raises(ss.PipelineError, match=r"bad trigger condition '>> 3'"):
        p.probe("src", "x", trigger=[">> 3"])
    with pytest.raises(ss.PipelineError, match="only samplers take a period"):
        p.probe("src", "x", "counter", period_us=10)
    with pytest.raises(ss.PipelineError, match="member 'zz' is not a sampler declared on 'src'"):
        p.probe("src", "g", "global", members=["zz"])
    p.probe("src", "x")
    with pytest.raises(ss.PipelineError, match="declared twice"):
        p.probe("src", "x")
    with pytest.raises(
        ss.QueryError, match=r"counter needs a counter probe, but 'src\.x' is a sampler"
    ):
        ss.run(p, ["counter(src.x)"], ss.RunOptions(out=tmp_path / "q.duckdb"))
    with pytest.raises(ss.PipelineError, match="outside a stage"):
        ss.probe("x")

    def wrong_method() -> Iterator[int]:
        ss.probe("x").count()
        yield 1

    def undeclared() -> Iterator[int]:
        ss.probe("y").sample(1)
        yield 1

    for body, message in (
        (
            wrong_method,
            "probe 'src.x' is a sampler: it has sample(), hold() and observe(), not count()",
        ),
        (undeclared, "stage 'src' has no probe 'y' (declared: x)"),
    ):
        q = ss.Pipeline("bad")
        q.add("src", body)
        q.add("sink", print)
        q.connect("src", "sink")
        q.probe("src", "x")
        out = tmp_path / f"{body.__name__}.duckdb"
        res = ss.run(q, ["sample(src.x): count"], ss.RunOptions(out=out))
        assert res.status == "failed"
        assert res.error is not None and message in res.error


def test_triggers_periods_and_a_global_snapshot(tmp_path: Path) -> None:
    values = [(i * 37) % 100 for i in range(600)]

    def source() -> Iterator[int]:
        seq, mult, tick = ss.probe("seq"), ss.probe("mult4"), ss.probe("tick")
        a, b, snap = ss.probe("a"), ss.probe("b"), ss.probe("snap")
        for i, v in enumerate(values):
            seq.sample(v)
            mult.observe(v)
            tick.sample(v)
            a.hold(i)
            b.hold(-i)
            if i % 50 == 49:
                snap.fire()
            t_end = time.perf_counter() + 50e-6
            while time.perf_counter() < t_end:
                pass
            yield i

    p = ss.Pipeline("triggers")
    p.add("src", source)
    p.add("sink", lambda x: None)
    p.connect("src", "sink")
    # depth 2: a value >= 90, then (later) one < 5; noise in between is ignored
    p.probe("src", "seq", trigger=[">= 90", "< 5"])
    p.probe("src", "mult4", "counter", trigger=["== 0 & 0x3"])
    p.probe("src", "tick", period_us=2000)
    p.probe("src", "a")
    p.probe("src", "b")
    p.probe("src", "snap", "global", members=["a", "b"])
    qs = [
        "sample(src.seq): count",
        "counter(src.mult4): sum",
        "sample(src.tick): count",
        "sample(src.a): count",
        "sample(src.b): count",
    ]
    out = tmp_path / "run.duckdb"
    res = ss.run(p, qs, ss.RunOptions(out=out, trace=True))
    assert res.status == "completed", res.error
    # the oracle: the same sequence rules, written out
    fired, level = [], 0
    for v in values:
        if level == 0 and v >= 90:
            level = 1
        elif level == 1 and v < 5:
            fired.append(v)
            level = 0
    with ss.load(out) as run:
        assert _stats(run, qs[0])["count"] == len(fired)
        assert _stats(run, qs[1])["sum"] == sum(1 for v in values if v % 4 == 0)
        assert _stats(run, qs[3])["count"] == _stats(run, qs[4])["count"] == 12
        ids = {pr.target: pr.id for pr in run.topology.probes}
        rec = run.table("record")

        def ticks(name: str) -> np.ndarray:
            sel = (rec["probe_id"] == ids[name]) & (rec["kind"] == 6)
            return np.sort(rec["ticks"][sel])

        assert ticks("src.seq").size == len(fired)
        # a global trigger: every member captures at the same ticks
        assert np.array_equal(ticks("src.a"), ticks("src.b"))
        values_a = np.sort(rec["value"][(rec["probe_id"] == ids["src.a"])])
        assert values_a.tolist() == [i for i in range(600) if i % 50 == 49]
        # time-driven: at most one capture in each period of the grid from the first one
        window = (ticks("src.tick") - ticks("src.tick")[0]) // 2_000_000
        assert window.size >= 2
        assert np.diff(window).min() >= 1
