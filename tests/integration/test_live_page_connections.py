"""The live page (``streamscope run --serve``) of a long run, with a thousand idle connections
held open to its port by another program of the machine (a connection needs no token): the
page, its report and its events are still served to the token's holder, the command holds a
share of its descriptors for them at most, and says so in a line, not a traceback per accept.
"""

from __future__ import annotations

import http.client
import os
import re
import resource
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from test_live_page import UNTIL_TOLD

from streamscope.report.liveconn import connection_cap
from watched import cli

#: Idle connections held open to the page.
IDLE = 1000
#: The command's descriptor limit: fewer than the idle connections, so that it could not hold
#: them all (1024, the usual default, already gives out at 1,019 of them).
COMMAND_NOFILE = 1000
#: The address ``--serve`` prints: loopback, its port, its token.
ADDRESS = re.compile(r"live page: http://127\.0\.0\.1:(\d+)/\?token=([A-Za-z0-9_-]{40,})$")


@pytest.fixture
def room_for_idle() -> Iterator[None]:
    """This process may hold the idle connections and its own files besides (its soft
    descriptor limit raised to its hard one where needed, and put back after)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = IDLE + 256
    if 0 <= hard < need:
        pytest.skip(
            f"holding {IDLE} connections needs {need} descriptors; the hard limit is {hard}"
        )
    if 0 <= soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _limit_nofile(n: int) -> Callable[[], None]:
    def limit() -> None:
        resource.setrlimit(
            resource.RLIMIT_NOFILE, (n, resource.getrlimit(resource.RLIMIT_NOFILE)[1])
        )

    return limit


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _token(stderr: Path, port: int, proc: subprocess.Popen[str]) -> str:
    """The token in the address the command printed first, for the port asked for."""
    deadline = time.monotonic() + 60
    while "\n" not in (text := stderr.read_text()):
        assert proc.poll() is None, text
        assert time.monotonic() < deadline, "the command printed no address"
        time.sleep(0.05)
    m = ADDRESS.fullmatch(text.splitlines()[0].strip())
    assert m is not None and int(m.group(1)) == port, text
    return m.group(2)


def _get(port: int, target: str) -> tuple[int, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", target, headers={"Host": f"127.0.0.1:{port}"})
    r = conn.getresponse()
    return r.status, r


def _closed_by_server(s: socket.socket) -> bool:
    """Whether the page closed ``s`` (already; this does not wait)."""
    try:
        return s.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except ConnectionResetError:
        return True


def _descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def test_a_thousand_idle_connections_leave_the_page_to_its_token(
    tmp_path: Path, room_for_idle: None
) -> None:
    port = _free_port()
    app, stop, out = tmp_path / "until_told.py", tmp_path / "stop", tmp_path / "p.duckdb"
    app.write_text(UNTIL_TOLD)  # the live page tests' own program
    stderr = tmp_path / "stderr.txt"
    cap = connection_cap(COMMAND_NOFILE)
    held: list[socket.socket] = []
    with stderr.open("w") as err:
        proc = subprocess.Popen(
            [*cli(), "run", str(app), "--serve", "--serve-port", str(port), "-o", str(out),
             "--quiet", "--", str(stop)],
            stdout=subprocess.DEVNULL, stderr=err, text=True, stdin=subprocess.DEVNULL,
            preexec_fn=_limit_nofile(COMMAND_NOFILE),  # noqa: PLW1509 (one system call: no lock)
        )  # fmt: skip
    try:
        token = _token(stderr, port, proc)
        before = _descriptors(proc.pid)
        held = [socket.create_connection(("127.0.0.1", port), timeout=30) for _ in range(IDLE)]
        # While they are held: the page, its events and its report, each on a connection of
        # its own opened after them all.
        status, r = _get(port, f"/?token={token}")
        assert status == 200 and f'const token = "{token}";' in r.read().decode()
        status, r = _get(port, f"/events?token={token}")
        assert status == 200 and r.readline().startswith(b"event: frames")
        r.close()
        status, r = _get(port, f"/report?token={token}")
        assert status == 200 and 'id="findings"' in r.read().decode()
        # ... the command holding no more of them than its share of its descriptors
        assert _descriptors(proc.pid) < before + cap + 32 < COMMAND_NOFILE
        still = sum(not _closed_by_server(s) for s in held)
        assert still <= cap, f"{still} idle connections held open, more than {cap}"
        # A request without the token is refused, and its connection closed with it.
        status, r = _get(port, "/report")
        assert status == 403 and r.getheader("connection") == "close"
    finally:
        for s in held:
            s.close()
        stop.touch()
        try:
            rc = proc.wait(timeout=120)
        finally:
            proc.kill()
    said = stderr.read_text()
    assert rc == 0, said[-3000:]
    assert "Traceback" not in said and len(said) < 20_000, said[:3000]
    about = [ln for ln in said.splitlines() if "connection" in ln.lower()]
    assert 1 <= len(about) <= 5, about
    assert f"{cap} at most" in about[0], about
