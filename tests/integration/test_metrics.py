"""``streamscope run --metrics`` scraped by a real Prometheus server (Debian's ``prometheus``,
as ``make prometheus`` installs it): what Prometheus stored of a run's counters is what
``streamscope show`` reports of the run file, and what the program itself counted."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from watched import cli

N = 300

PROGRAM = f"""\
import queue
import threading
import time


def produce(q):
    for i in range({N}):
        q.put(i)
        time.sleep(0.01)


def consume(q, got):
    for _ in range({N}):
        got.append(q.get())


q = queue.Queue(maxsize=10)
got = []
workers = [threading.Thread(target=produce, args=(q,)),
           threading.Thread(target=consume, args=(q, got))]
for w in workers:
    w.start()
for w in workers:
    w.join()
print(len(got))
"""

CONFIG = """\
global:
  scrape_interval: 500ms
  scrape_timeout: 400ms
scrape_configs:
  - job_name: streamscope
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=5) as answer:
        return json.loads(answer.read())


def _prometheus(tmp_path: Path, scraped_port: int) -> tuple[subprocess.Popen[bytes], str]:
    """A Prometheus server scraping ``127.0.0.1:scraped_port`` every 0.5 s, and its address."""
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.skip("needs Prometheus's server: install Debian's prometheus (`make prometheus`)")
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(port=scraped_port))
    web = f"127.0.0.1:{_free_port()}"
    log = (tmp_path / "prometheus.log").open("wb")
    server = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address={web}"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(f"http://{web}/-/ready", timeout=1) as ready:
                if ready.status == 200:
                    return server, f"http://{web}"
        except OSError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            server.kill()
            pytest.fail("prometheus did not start:\n" + (tmp_path / "prometheus.log").read_text())
        time.sleep(0.1)


def _scraping(prometheus: str) -> None:
    """Wait until Prometheus tried its first scrape (it starts new targets some 5 s after its
    own start): from then on it scrapes every 0.5 s, the run's whole time."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (target,) = _get(f"{prometheus}/api/v1/targets")["data"]["activeTargets"] or [None]
        if target is not None and target["health"] != "unknown":
            return
        time.sleep(0.1)
    pytest.fail("prometheus did not start scraping")


def _last(prometheus: str, selector: str) -> dict[tuple[tuple[str, str], ...], float]:
    """The last value Prometheus stored of each series of ``selector`` (the run's end marks
    them stale, so an instant query of them now finds none)."""
    query = urllib.parse.quote(f"last_over_time({selector}[5m])")
    answer = _get(f"{prometheus}/api/v1/query?query={query}")
    assert answer["status"] == "success", answer
    return {
        tuple(sorted((k, v) for k, v in r["metric"].items() if k in ("channel", "stage", "state"))):
        float(r["value"][1])
        for r in answer["data"]["result"]
    }  # fmt: skip


def test_prometheus_scrapes_the_runs_counters_as_show_reports_them(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(PROGRAM)
    port = _free_port()
    server, prometheus = _prometheus(tmp_path, port)
    try:
        _scraping(prometheus)
        ran = subprocess.run(
            [*cli(), "run", "prog.py", "--metrics", f"127.0.0.1:{port}", "-o", "run.duckdb",
             "--quiet"],
            capture_output=True, text=True, timeout=120, check=False, cwd=tmp_path,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr[-3000:]
        assert ran.stdout.strip() == str(N)
        assert f"metrics: http://127.0.0.1:{port}/metrics" in ran.stderr
        shown = subprocess.run([*cli(), "show", "run.duckdb", "--json"], capture_output=True,
                               text=True, timeout=60, check=True, cwd=tmp_path)  # fmt: skip
        doc = json.loads(shown.stdout)
        (channel,) = [c["name"] for c in doc["channels"]]
        items: dict[tuple[tuple[str, str], ...], int] = {}
        state_s: dict[tuple[tuple[str, str], ...], float] = {}
        for q in doc["queries"]:
            for t in q["targets"]:
                if q["metric"] == "throughput" and t["target"] == channel:
                    items = {
                        (("channel", channel),): sum(
                            round(f["stats"]["mean"] * f["covered_ns"] / 1e9)
                            for f in t["frames"]
                            if f["stats"]["mean"]
                        )
                    }
                if q["metric"] == "state":
                    for f in t["frames"]:
                        for state, share in (f["duty"] or {}).items():
                            key = (("stage", t["target"]), ("state", state))
                            state_s[key] = state_s.get(key, 0.0) + share * f["covered_ns"] / 1e9
        assert items == {(("channel", channel),): N}  # the run file counts what the program did
        # The run ended before its last scrape: what Prometheus has last is the run's end
        deadline = time.monotonic() + 10
        while True:
            running = _last(prometheus, 'streamscope_run_running{run="prog"}')
            got = _last(prometheus, 'streamscope_channel_items_total{run="prog"}')
            if (running == {(): 0.0} and got == items) or time.monotonic() > deadline:
                break
            time.sleep(0.25)
        assert running == {(): 0.0}
        assert got == items
        stored = _last(prometheus, 'streamscope_stage_state_seconds_total{run="prog"}')
        assert stored.keys() == state_s.keys()
        for key, seconds in state_s.items():
            assert stored[key] == pytest.approx(seconds, rel=1e-9, abs=1e-9), key
        assert sum(v for (_, (_, state)), v in stored.items() if state != "idle") > 1.0
        # what watching cost: the monitor's own process, some CPU and less than its run took
        ((_, cpu_s),) = _last(
            prometheus, 'streamscope_monitor_cpu_seconds_total{run="prog"}'
        ).items()
        assert 0.0 < cpu_s < 60.0
    finally:
        server.terminate()
        try:
            server.wait(10)
        except subprocess.TimeoutExpired:
            server.kill()
