"""The live page (``streamscope run --serve``) opened in headless Chromium while a run goes on:
frames appear as they close, the report it frames is the run's, and no script errs. It serves
only requests for its own address that carry its token, and none of its threads is the
program's.

The browser sends every fetch but loopback to a closed port (no network).
"""

from __future__ import annotations

import http.client
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest

import streamscope as ss
from oracles import EXAMPLES
from watched import cli

FRAMES = re.compile(r'<b id="frames">(\d+)</b>')
STATE = re.compile(r'<b id="state">(\w+)</b>')
#: The address ``--serve`` prints: loopback, its port, its token.
ADDRESS = re.compile(r"live page: http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{40,})$")


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("the live page test needs a headless browser: install Debian's chromium")


def _dump(url: str, profile: Path, *extra: str) -> tuple[str, str]:
    """The page's DOM as the browser has it after its scripts ran a while, and its log."""
    proc = subprocess.run(
        [_chromium(), "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
         f"--user-data-dir={profile}", "--proxy-server=127.0.0.1:9", "--enable-logging=stderr",
         "--v=0", *extra, "--dump-dom", url],
        capture_output=True, text=True, timeout=120, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout, proc.stderr


def _console_errors(log: str) -> list[str]:
    return [ln for ln in log.splitlines() if ":CONSOLE" in ln and "error" in ln.lower()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _address(line: str, port: int) -> str:
    """The token in the address ``--serve`` printed first, for the port asked for."""
    m = ADDRESS.fullmatch(line.strip())
    assert m is not None and int(m.group(1)) == port, line
    return m.group(2)


def _get(port: int, target: str, host: str | None = None) -> tuple[int, str]:
    """A real HTTP GET of ``target`` from the page on ``port`` (``host``: the ``Host`` header
    sent; by default its own address): status and body."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", target, headers={"Host": host or f"127.0.0.1:{port}"})
        r = conn.getresponse()
        return r.status, r.read().decode()
    finally:
        conn.close()


def test_the_live_page_shows_frames_as_they_close(tmp_path: Path) -> None:
    port = _free_port()
    out = tmp_path / "live.duckdb"
    proc = subprocess.Popen(
        [*cli(), "run", str(EXAMPLES / "mm1.py"), "--serve", "--serve-port", str(port),
         "-o", str(out), "--quiet", "--", "--items", "9000"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        token = _address(proc.stderr.readline(), port)
        url = f"http://127.0.0.1:{port}/?token={token}"
        seen: list[int] = []
        logs = []
        deadline = time.monotonic() + 60
        # The page's count of closed frames, taken twice while the run goes on, grows.
        while len(seen) < 2 and time.monotonic() < deadline:
            time.sleep(1.5)
            dom, log = _dump(url, tmp_path / f"profile{len(seen)}", "--timeout=3000")
            logs.append(log)
            (state,) = STATE.findall(dom)
            assert state == "running", "the run ended before the page was seen twice"
            (count,) = FRAMES.findall(dom)
            if int(count) > (seen[-1] if seen else 0):
                seen.append(int(count))
        assert len(seen) == 2 and seen[1] > seen[0] > 0, seen
        # The report it shows is the run's report so far: its sections, its stages.
        report, log = _dump(f"http://127.0.0.1:{port}/report?token={token}&v=1",
                            tmp_path / "profile-report", "--virtual-time-budget=10000")  # fmt: skip
        logs.append(log)
        assert 'id="findings"' in report and 'id="pipeline"' in report
        assert "server" in report
        for log in logs:
            assert not _console_errors(log), _console_errors(log)
    finally:
        rc = proc.wait(timeout=120)
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    with ss.load(out) as run:
        assert run.status == "completed"


def test_the_live_page_of_a_program_run_as_it_is_grows_with_it(tmp_path: Path) -> None:
    """A program's stages and channels appear as it runs: the page's report shows them."""
    import urllib.request

    port = _free_port()
    app = Path(__file__).parent / "apps" / "threads_program.py"
    proc = subprocess.Popen(
        [*cli(), "run", str(app), "--serve", "--serve-port", str(port), "-o",
         str(tmp_path / "p.duckdb"), "--quiet", "--", "1200", str(tmp_path / "truth.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        token = _address(proc.stderr.readline(), port)
        deadline = time.monotonic() + 30
        report = ""
        while time.monotonic() < deadline and 'data-channel="reader -&gt; parser"' not in report:
            time.sleep(0.5)
            url = f"http://127.0.0.1:{port}/report?token={token}"
            with urllib.request.urlopen(url, timeout=30) as r:
                report = r.read().decode()
        for stage in ("reader", "parser", "writer"):
            assert f'data-stage="{stage}"' in report
        assert 'data-channel="reader -&gt; parser"' in report
    finally:
        rc = proc.wait(timeout=120)
    assert rc == 0


#: A program that makes items until the file named first exists (at most two minutes).
UNTIL_TOLD = """
import pathlib, queue, sys, threading, time
stop, q = pathlib.Path(sys.argv[1]), queue.Queue(4)
def produce():
    end = time.monotonic() + 120
    while not stop.exists() and time.monotonic() < end:
        q.put(1)
        time.sleep(0.002)
    q.put(None)
def consume():
    while q.get() is not None:
        pass
workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
for w in workers:
    w.start()
for w in workers:
    w.join()
"""


def test_the_live_page_serves_its_own_address_with_its_token_only(tmp_path: Path) -> None:
    """A page elsewhere reaching the port (DNS rebinding: its own name in ``Host``) or a
    request without the printed token is refused; the page's own address with the token is
    served, and the run file holds the program's stages alone, none of the server's."""
    port = _free_port()
    app, stop, out = tmp_path / "until_told.py", tmp_path / "stop", tmp_path / "p.duckdb"
    app.write_text(UNTIL_TOLD)
    proc = subprocess.Popen(
        [*cli(), "run", str(app), "--serve", "--serve-port", str(port), "-o", str(out),
         "--quiet", "--", str(stop)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        token = _address(proc.stderr.readline(), port)
        report, deadline = "", time.monotonic() + 60
        while 'data-channel="produce -&gt; consume"' not in report:
            assert time.monotonic() < deadline, "the page never showed the program's channel"
            time.sleep(0.5)
            status, report = _get(port, f"/report?token={token}")
            assert status == 200, report
        for host in (f"localhost:{port}", f"[::1]:{port}", f"LOCALHOST:{port}"):
            assert _get(port, f"/report?token={token}", host)[0] == 200, host
        status, page = _get(port, f"/?token={token}")
        assert status == 200 and 'new EventSource("events?token=" + token)' in page
        assert f'const token = "{token}";' in page
        refused = [
            _get(port, f"/report?token={token}", "evil.example"),
            _get(port, f"/report?token={token}", f"evil.example:{port}"),
            _get(port, f"/report?token={token}", f"127.0.0.1:{port + 1}"),
            _get(port, "/report"),
            _get(port, "/report?token="),
            _get(port, f"/report?token={token[:-1]}"),
            _get(port, f"/report?token={token}x"),
            _get(port, "/"),
            _get(port, "/events"),
        ]
        for status, body in refused:
            assert status == 403 and "data-stage" not in body and str(app) not in body, body
        assert "token" in refused[3][1] and "127.0.0.1" in refused[0][1]
    finally:
        stop.touch()
        try:
            rc = proc.wait(timeout=120)
        finally:
            proc.kill()
    assert rc == 0, proc.stderr.read() if proc.stderr else ""
    with ss.load(out) as run:
        assert {s.name for s in run.topology.stages} == {"produce", "consume"}
        assert [c.name for c in run.topology.channels] == ["produce -> consume"]


#: A program that serves a live page of its own while its standard library is watched: the
#: server's thread, event loop, tasks and workers are streamscope's, none of its stages.
_SERVES_A_PAGE = """
import queue, threading, urllib.request
from streamscope.core.topology import Topology
from streamscope.report.live import LivePage
from streamscope.runtime.options import RunOptions, make_meta

page = LivePage(make_meta("inner", RunOptions()), Topology("inner"), [])
url = page.start()
base, _, token = url.partition("?")
q = queue.Queue(4)
def produce():
    for i in range(200):
        q.put(i)
    q.put(None)
def consume():
    while q.get() is not None:
        pass
workers = [threading.Thread(target=produce), threading.Thread(target=consume)]
for w in workers:
    w.start()
for path in ("", "report", "events"):
    with urllib.request.urlopen(base + path + "?" + token, timeout=60) as r:
        r.read(1)
for w in workers:
    w.join()
page.finish("completed", None, 0)
page.stop()
"""


def test_the_live_pages_server_is_none_of_a_watched_programs_stages(tmp_path: Path) -> None:
    app, out = tmp_path / "serves_a_page.py", tmp_path / "s.duckdb"
    app.write_text(_SERVES_A_PAGE)
    proc = subprocess.run(
        [*cli(), "run", str(app), "-o", str(out), "--quiet"],
        capture_output=True, text=True, timeout=180, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    with ss.load(out) as run:
        assert {s.name for s in run.topology.stages} == {"produce", "consume"}
        assert [c.name for c in run.topology.channels] == ["produce -> consume"]
        assert [r.name for r in run.topology.resources if "asyncio" in r.name] == []
