"""``--ray-address`` where no Ray cluster answers: ``streamscope run`` says so in one line and
exits 2 within seconds (Ray itself retries such an address for minutes, printing each retry)."""

from __future__ import annotations

import http.server
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest

from watched import cli

APP = Path(__file__).parent / "apps" / "hosts_program.py"
#: The limit the command must end within (the check itself waits 3 s for an answer).
LIMIT_S = 10.0


@contextmanager
def _refusing() -> Iterator[str]:
    """A loopback port where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    yield f"127.0.0.1:{port}"


@contextmanager
def _silent() -> Iterator[str]:
    """A loopback port that accepts connections and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield f"127.0.0.1:{s.getsockname()[1]}"


@contextmanager
def _web_server() -> Iterator[str]:
    """A loopback port that answers, but in HTTP/1 (a dashboard's port, not a cluster's)."""

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("where", "said"),
    [
        (_refusing, "nothing answered at the Ray address {} (connection refused)"),
        (_silent, "nothing answered at the Ray address {} (no answer within 3 s)"),
        (_web_server, "what answered at the Ray address {} is not a Ray cluster"),
    ],
    ids=["refused", "silent", "not-ray"],
)
def test_an_address_where_no_cluster_answers_is_a_one_line_error(
    tmp_path: Path, where: Callable[[], AbstractContextManager[str]], said: str
) -> None:
    out = tmp_path / "run.duckdb"
    with where() as address:
        t0 = time.monotonic()
        done = subprocess.run(
            [*cli(), "run", str(APP), "--out", str(out), "--ray-address", address],
            capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        took = time.monotonic() - t0
    print(f"{address}: exit {done.returncode} after {took:.2f} s: {done.stderr.strip()}")
    assert done.returncode == 2, done.stderr[-2000:]
    assert took < LIMIT_S
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr[-2000:]  # none of Ray's retries
    assert lines[0].startswith("streamscope: error: " + said.format(address)), lines[0]
    assert not out.exists()
