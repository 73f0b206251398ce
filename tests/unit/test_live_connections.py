"""The live page's connections within bounds: the books (cap, which connection makes room,
deadlines, the rate-limited notice) on a fake clock, then the server that keeps them on real
loopback sockets, with deadlines short enough to pass in a moment."""

from __future__ import annotations

import asyncio
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from streamscope.report.liveconn import (
    FD_SHARE,
    HEAD_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    MAX_CONNECTIONS,
    NOTICE_EVERY_S,
    Connection,
    ConnectionLimiter,
    LimitedServer,
    connection_cap,
)


class Clock:
    """A monotonic clock the test moves (s)."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def books(cap: int) -> tuple[ConnectionLimiter[str], Clock]:
    clock = Clock()
    return ConnectionLimiter(cap, clock), clock


def test_the_cap_is_a_share_of_the_descriptor_limit() -> None:
    assert connection_cap(1024) == 1024 // FD_SHARE == 256 == MAX_CONNECTIONS
    assert connection_cap(1_048_576) == MAX_CONNECTIONS
    assert connection_cap(-1) == MAX_CONNECTIONS  # RLIM_INFINITY
    assert connection_cap(256) == 64  # macOS's default
    assert connection_cap(10) == 4
    with pytest.raises(ValueError, match="at least one"):
        ConnectionLimiter(0)


def test_at_the_cap_a_new_connection_takes_the_place_of_the_one_waiting_longest() -> None:
    lim, clock = books(3)
    for name in "abc":
        assert lim.opened(name) is None
        clock.now += 1
    lim.busy("a")  # a request in progress: never closed for another
    assert lim.opened("d") == "b" and len(lim) == 3
    clock.now += 1
    lim.idle("a")  # its response done: waiting again, the newest
    assert [lim.opened(n) for n in "efg"] == ["c", "d", "a"]
    assert len(lim) == 3 and not lim.full()
    lim.closed("b")  # closed for "d" already: off the books since
    assert len(lim) == 3


def test_when_every_connection_is_busy_a_new_one_is_refused() -> None:
    lim, _ = books(2)
    for name in "ab":
        lim.opened(name)
        lim.busy(name)
    assert lim.full()
    assert lim.opened("c") == "c" and len(lim) == 2
    lim.closed("a")
    assert not lim.full() and lim.opened("d") is None and len(lim) == 2


def test_a_head_is_due_within_its_timeout_however_it_trickles_in() -> None:
    lim, clock = books(8)
    lim.opened("slow")
    clock.now = 1.0
    lim.heard("slow")  # a byte of its head: no more time for that
    clock.now = HEAD_TIMEOUT_S - 0.01
    assert lim.expired() == []
    clock.now = HEAD_TIMEOUT_S
    assert lim.expired() == ["slow"] and len(lim) == 0
    lim.closed("slow")
    assert lim.expired() == []


def test_a_connection_kept_alive_waits_longer_but_not_for_a_trickled_head() -> None:
    lim, clock = books(8)
    for name in ("idle", "trickle", "events"):
        lim.opened(name)
        lim.busy(name)
    clock.now = 1.0
    lim.idle("idle")
    lim.idle("trickle")
    clock.now = 2.0
    lim.heard("trickle")
    clock.now = 2.0 + HEAD_TIMEOUT_S
    assert lim.expired() == ["trickle"]
    clock.now = 1.0 + IDLE_TIMEOUT_S - 0.01
    assert lim.expired() == []
    clock.now = 1.0 + IDLE_TIMEOUT_S
    assert lim.expired() == ["idle"]
    clock.now = 1e6  # a response still going (server-sent events) has no deadline
    assert lim.expired() == [] and len(lim) == 1


def test_refusals_are_told_in_a_line_at_most_so_often() -> None:
    lim, clock = books(1)
    assert lim.notice() is None
    lim.opened("a")
    lim.opened("b")  # closes "a"
    first = lim.notice()
    assert first is not None and "closed 1 idle connection for newer ones" in first
    assert "1 at most" in first and f"every {NOTICE_EVERY_S:g} s" in first
    for name in "cdef":
        lim.opened(name)
    lim.busy("f")
    lim.opened("g")
    lim.unaccepted("[Errno 24] Too many open files")
    clock.now = NOTICE_EVERY_S - 1
    assert lim.notice() is None
    clock.now = NOTICE_EVERY_S
    line = lim.notice()
    assert line is not None and "\n" not in line
    assert "closed 4 idle connections" in line and "refused 1 connection" in line
    assert "could not accept a connection 1 time ([Errno 24] Too many open files" in line
    clock.now = 10 * NOTICE_EVERY_S
    assert lim.notice() is None  # nothing new


# --- the server, on loopback ---------------------------------------------------------------------


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """``/stream``: a chunk every 50 ms until the client goes; anything else: ``ok``."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    if scope["path"] != "/stream":
        await send({"type": "http.response.body", "body": b"ok"})
        return

    async def gone() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    went = asyncio.ensure_future(gone())
    while not went.done():
        await send({"type": "http.response.body", "body": b"tick\n", "more_body": True})
        await asyncio.sleep(0.05)


@pytest.fixture
def served() -> Iterator[tuple[int, list[str]]]:
    """A server holding 3 connections at most, each waiting 0.3 s at most: its port, and the
    lines it said."""
    sock = socket.create_server(("127.0.0.1", 0))
    said: list[str] = []
    config = uvicorn.Config(
        _app, log_level="warning", lifespan="off", ws="none", timeout_graceful_shutdown=5
    )
    limiter: ConnectionLimiter[Connection] = ConnectionLimiter(
        3, head_timeout_s=0.3, idle_timeout_s=0.3
    )
    server = LimitedServer(config, sock, limiter, said.append)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    yield sock.getsockname()[1], said
    server.should_exit = True
    thread.join(10)


def _closed_by_server(s: socket.socket, within_s: float = 20.0) -> bool:
    """Whether the server closed ``s`` (an end of stream) within ``within_s`` (a cap against a
    hang, not a measure)."""
    s.settimeout(within_s)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def test_idle_connections_make_room_and_time_out_and_a_stream_goes_on(
    served: tuple[int, list[str]],
) -> None:
    port, said = served
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    trickle = socket.create_connection(("127.0.0.1", port))  # makes the first one go
    trickle.sendall(b"GET / HTTP/1.1\r\nHo")
    stream = socket.create_connection(("127.0.0.1", port))
    stream.sendall(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
    try:
        assert _closed_by_server(idle[0])
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
        conn.request("GET", "/")  # served at the cap: the one waiting longest makes room
        assert conn.getresponse().read() == b"ok"
        # the rest time out waiting for a head, whole or trickled; the stream is never cut
        assert all(_closed_by_server(s) for s in (*idle[1:], trickle))
        assert _closed_by_server(conn.sock)  # kept alive, idle since: closed too
        stream.settimeout(20)
        got = b""
        while got.count(b"tick") < 30:  # 1.5 s of ticks: five times its deadlines
            chunk = stream.recv(4096)
            assert chunk, "the server cut a response that was still going"
            got += chunk
    finally:
        for s in (*idle, trickle, stream):
            s.close()
    deadline = time.monotonic() + 20
    while not said and time.monotonic() < deadline:
        time.sleep(0.05)
    # one line however many were closed, the rest told a minute later at the soonest
    assert len(said) == 1 and "idle connection" in said[0] and "3 at most" in said[0], said
