"""Function tracing in real runs: per-stage profiles count exactly the calls made, the switch
works while running, exclusions by name and by call rate are applied and recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import streamscope as ss

N = 300


def inner(x: int) -> int:
    return x * 2


def outer(x: int) -> int:
    return inner(x) + inner(x + 1)


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


class Work:
    def process(self, item: int) -> int:
        return outer(item)


def _pipeline(work: Any, resource: Any = "thread") -> ss.Pipeline:
    p = ss.Pipeline("traced")
    p.add("src", range(N))
    p.add("work", work, resource=resource)
    p.add("sink", lambda x: None)
    p.chain("src", "work", "sink")
    return p


def _profile(run: ss.Run) -> dict[str, dict[str, Any]]:
    return {r["function"].rpartition(":")[2]: r for r in run.profiles() if r["stage"] == "work"}


@pytest.mark.parametrize("where", ["thread", "process"])
def test_profiles_count_every_call_of_a_traced_stage(tmp_path: Path, where: str) -> None:
    p = _pipeline(Work(), "thread" if where == "thread" else ss.Process("w"))
    p.trace(__name__, stages=["work"])
    out = tmp_path / "run.duckdb"
    res = ss.run(p, ["state(work): duty"], ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        prof = _profile(run)
        assert prof["Work.process"]["calls"] == N
        assert prof["outer"]["calls"] == N
        assert prof["inner"]["calls"] == 2 * N
        for r in prof.values():
            assert 0 <= r["self_ns"] <= r["total_ns"]
            assert r["max_ns"] <= r["total_ns"]
        # callers include their callees
        assert prof["outer"]["total_ns"] >= prof["inner"]["total_ns"]
        assert prof["Work.process"]["total_ns"] >= prof["outer"]["total_ns"]
        # the source and the sink were not traced
        assert {r["stage"] for r in run.profiles()} == {"work"}
        trace = [pr for pr in run.topology.probes if pr.kind == "trace"]
        assert [pr.target for pr in trace] == ["work"]
        drops = {d.probe_id: d for d in run.drops()}
        assert sum(d.dropped for d in drops.values()) == 0
        events = sum(d.recorded for d in run.drops() if d.probe_id == trace[0].id)
        assert events == 2 * 4 * N  # enter + exit of process, outer and two inners
    # instrumentation is undone after the run
    assert outer.__code__ is _original_outer_code


_original_outer_code = outer.__code__


def test_the_switch_stops_and_restarts_tracing_while_running(tmp_path: Path) -> None:
    def work(item: int) -> int:
        if item == 100:
            ss.tracing(False)
        if item == 200:
            ss.tracing(True)
        return outer(item)

    p = _pipeline(work)
    p.trace(__name__, stages=["work"])
    out = tmp_path / "run.duckdb"
    res = ss.run(p, ["state(work): duty"], ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        prof = _profile(run)
        # items 0..99 and 200..299 traced; the call that switched back on was not (it started
        # with tracing off); the one that switched off was (it had entered already)
        assert prof["outer"]["calls"] == 200
        assert prof["inner"]["calls"] == 400


def test_exclusion_by_name_and_by_call_rate(tmp_path: Path) -> None:
    def work(item: int) -> int:
        for _ in range(50):
            inner(item)  # hot: about 25 000 calls/s
        spin(0.002)
        return outer(item)  # cold: about 500 calls/s

    p = _pipeline(work)
    p.trace(__name__, stages=["work"], exclude=["*spin"], max_calls_per_s=5000)
    out = tmp_path / "run.duckdb"
    res = ss.run(p, ["state(work): duty"], ss.RunOptions(out=out))
    assert res.status == "completed", res.error
    with ss.load(out) as run:
        excluded = run.trace_exclusions()
        assert excluded[f"{__name__}:spin"].startswith("name pattern")
        assert "calls/s > 5000" in excluded[f"{__name__}:inner"]
        assert f"{__name__}:outer" not in excluded
        assert f"{__name__}:spin" not in run.topology.functions
        prof = _profile(run)
        assert prof["outer"]["calls"] == N
        # the hot function was traced until the first check found it too hot
        assert 0 < prof["inner"]["calls"] < 50 * N


def test_cli_traces_the_app_file_and_show_prints_profiles(tmp_path: Path) -> None:
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            """
            import streamscope as ss

            def helper(x):
                return x + 1

            def work(x):
                return helper(x)

            def pipeline(argv):
                p = ss.Pipeline("cli")
                p.add("src", range(50))
                p.add("work", work)
                p.add("sink", lambda x: None)
                p.chain("src", "work", "sink")
                return p

            QUERIES = ["state(work): duty"]
            """
        )
    )
    out = tmp_path / "run.duckdb"
    cli = [sys.executable, "-m", "streamscope"]
    done = subprocess.run(
        [*cli, "run", str(app), "--out", str(out), "--quiet", "--trace-stage", "work"],
        check=False, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    doc = json.loads(
        subprocess.run([*cli, "show", str(out), "--json"], capture_output=True, text=True,
                       check=True).stdout
    )  # fmt: skip
    calls = {r["function"]: r["calls"] for r in doc["profiles"]}
    assert calls == {"app:work": 50, "app:helper": 50}
    shown = subprocess.run([*cli, "show", str(out)], capture_output=True, text=True, check=True)
    assert "function profiles" in shown.stdout
    assert "app:helper" in shown.stdout
    page = tmp_path / "report.html"
    subprocess.run([*cli, "report", str(out), "-o", str(page)], capture_output=True, check=True)
    html = page.read_text()
    assert 'id="profiles"' in html and "app:helper" in html and 'id="overhead"' in html
    bad = subprocess.run(
        [*cli, "run", str(app), "--out", str(tmp_path / "x.duckdb"), "--trace-stage", "wrok"],
        check=False, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "trace: no stage matches 'wrok'" in bad.stderr
