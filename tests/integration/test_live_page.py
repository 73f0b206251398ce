"""The live page (``streamscope run --serve``) opened in headless Chromium while a run goes on:
frames appear as they close, the report it frames is the run's, and no script errs.

The browser sends every fetch but loopback to a closed port (no network).
"""

from __future__ import annotations

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
        line = proc.stderr.readline()
        assert line.strip() == f"live page: http://127.0.0.1:{port}/", line
        url = f"http://127.0.0.1:{port}/"
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
        report, log = _dump(url + "report?v=1", tmp_path / "profile-report",
                            "--virtual-time-budget=10000")  # fmt: skip
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
         str(tmp_path / "p.duckdb"), "--quiet", "--", "4000", str(tmp_path / "truth.json")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().strip() == f"live page: http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 30
        report = ""
        while time.monotonic() < deadline and 'data-channel="reader -&gt; parser"' not in report:
            time.sleep(0.5)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/report", timeout=30) as r:
                report = r.read().decode()
        for stage in ("reader", "parser", "writer"):
            assert f'data-stage="{stage}"' in report
        assert 'data-channel="reader -&gt; parser"' in report
    finally:
        rc = proc.wait(timeout=120)
    assert rc == 0
