"""The live page's connections, held within bounds: at most a share of the process's descriptors.

In: the page's listening socket, its ASGI app, and each connection's life as its HTTP protocol
sees it (opened, a request head begun, a request answered, closed). Out: the connections served,
those closed (the longest idle at the cap, those past a deadline), and a line a minute at most.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle
from uvicorn.server import ServerState

#: The most connections the page holds at once, whatever the descriptor limit.
MAX_CONNECTIONS = 256
#: ... and at most this share (1/N) of the process's descriptor limit (``RLIMIT_NOFILE``), which
#: the program, the run's own files and the monitor's rings share with the page.
FD_SHARE = 4
#: A connection must have sent a whole request head this long after it opened, or after the
#: first byte of a later head (s): a client on loopback sends one in microseconds.
HEAD_TIMEOUT_S = 5.0
#: A connection kept alive with no request in progress is closed after this long (s). A response
#: still going (the page's server-sent events) has no deadline.
IDLE_TIMEOUT_S = 30.0
#: At most one line this often (s) about connections closed early, refused or not accepted.
NOTICE_EVERY_S = 60.0
#: Accepting waits this long (s) after the process ran out of descriptors (or any other accept
#: error), instead of trying again at once, over and over.
ACCEPT_PAUSE_S = 1.0
#: Connections the kernel queues for the page until it accepts them (at most the system's
#: ``somaxconn``): a burst beyond it waits a second for the client's next try.
BACKLOG = 1024
#: The most connections accepted at a time, before the page's other work goes on.
ACCEPT_BATCH = 128

#: A connection, as the limiter's caller knows it (hashable: the books are keyed by it).
K = TypeVar("K")


def connection_cap(nofile: int) -> int:
    """The most connections the page holds, for the process's soft descriptor limit ``nofile``
    (``resource.RLIM_INFINITY``, or any value < 0: none): ``nofile // FD_SHARE``, at most
    ``MAX_CONNECTIONS`` and at least 4."""
    if nofile < 0:
        return MAX_CONNECTIONS
    return max(4, min(MAX_CONNECTIONS, nofile // FD_SHARE))


class Connection(Protocol):
    """A connection as its server sees it: one it can close."""

    def hang_up(self) -> None:
        """Close it (its response, if any, is cut); closed already: nothing."""


@dataclass(slots=True)
class _Waiting:
    """A connection with no request in progress: when it is closed, and whether a byte of its
    next request head came."""

    deadline_s: float
    heard: bool = False


class ConnectionLimiter(Generic[K]):
    """The books of a server's connections, each waiting (for a request head) or busy (its
    request is being answered): at most ``cap`` open; a new one past it takes the place of the
    one waiting longest, or is refused when all are busy. Times are ``clock()``'s, in seconds.

    Only waiting connections have a deadline: ``head_timeout_s`` after they opened or after the
    first byte of a later head, ``idle_timeout_s`` after their last response. The caller closes
    what ``opened`` and ``expired`` return; those are off the books at once.
    """

    def __init__(
        self,
        cap: int,
        clock: Callable[[], float] = time.monotonic,
        head_timeout_s: float = HEAD_TIMEOUT_S,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        notice_every_s: float = NOTICE_EVERY_S,
    ) -> None:
        if cap < 1:
            raise ValueError(f"a server holds at least one connection, not {cap}")
        self.cap = cap
        self._clock = clock
        self._head_s, self._idle_s, self._notice_s = head_timeout_s, idle_timeout_s, notice_every_s
        #: Waiting connections, the one waiting longest first.
        self._waiting: OrderedDict[K, _Waiting] = OrderedDict()
        self._busy: set[K] = set()
        #: Since the last notice: connections closed for newer ones, refused, not accepted.
        self._evicted = self._refused = self._unaccepted = 0
        self._accept_error = ""
        self._quiet_until = -math.inf

    def __len__(self) -> int:
        return len(self._waiting) + len(self._busy)

    def full(self) -> bool:
        """Whether a connection opened now would be refused: ``cap`` open, every one busy."""
        return len(self) >= self.cap and not self._waiting

    def opened(self, conn: K) -> K | None:
        """``conn`` opened, now waiting for its first request head; the connection to close for
        it (the one waiting longest; ``conn`` itself when all are busy), or None."""
        out: K | None = None
        if len(self) >= self.cap:
            if not self._waiting:
                self.refuse()
                return conn
            out, _ = self._waiting.popitem(last=False)
            self._evicted += 1
        self._waiting[conn] = _Waiting(self._clock() + self._head_s)
        return out

    def refuse(self) -> None:
        """A connection was closed as it was accepted: all ``cap`` were busy."""
        self._refused += 1

    def unaccepted(self, why: str) -> None:
        """Accepting failed (``why``: the error), the process out of descriptors as a rule."""
        self._unaccepted += 1
        self._accept_error = why

    def heard(self, conn: K) -> None:
        """Bytes came on ``conn``: if it was waiting, its head must be whole within
        ``head_timeout_s`` of the first."""
        waiting = self._waiting.get(conn)
        if waiting is not None and not waiting.heard:
            waiting.heard = True
            waiting.deadline_s = min(waiting.deadline_s, self._clock() + self._head_s)

    def busy(self, conn: K) -> None:
        """A whole request head came on ``conn``: its request is answered, with no deadline."""
        if self._waiting.pop(conn, None) is not None:
            self._busy.add(conn)

    def idle(self, conn: K) -> None:
        """``conn``'s response is done and it is kept alive: waiting again, the newest."""
        if conn in self._busy:
            self._busy.discard(conn)
            self._waiting[conn] = _Waiting(self._clock() + self._idle_s)

    def closed(self, conn: K) -> None:
        """``conn`` is closed (by either end); unknown or already off the books: nothing."""
        self._busy.discard(conn)
        self._waiting.pop(conn, None)

    def expired(self) -> list[K]:
        """The waiting connections past their deadline, off the books now (for the caller to
        close). A scan of at most ``cap``: called ten times a second, never per request."""
        now = self._clock()
        out = [c for c, w in self._waiting.items() if w.deadline_s <= now]
        for conn in out:
            del self._waiting[conn]
        return out

    def notice(self) -> str | None:
        """One line on what was closed early, refused or not accepted since the last line, when
        anything was and the last is ``notice_every_s`` old; None otherwise (deadlines passed
        are not told: browsers open connections ahead and leave them)."""
        now = self._clock()
        if now < self._quiet_until or not (self._evicted or self._refused or self._unaccepted):
            return None
        said = []
        if self._evicted:
            said.append(f"closed {_many(self._evicted, 'idle connection')} for newer ones")
        if self._refused:
            said.append(f"refused {_many(self._refused, 'connection')} (all busy)")
        if self._unaccepted:
            said.append(
                f"could not accept a connection {_many(self._unaccepted, 'time')} "
                f"({self._accept_error}; trying again {ACCEPT_PAUSE_S:g} s later each time)"
            )
        first = self._quiet_until == -math.inf
        self._evicted = self._refused = self._unaccepted = 0
        self._quiet_until = now + self._notice_s
        again = f"; told again at most every {self._notice_s:g} s" if first else ""
        return f"live page: {', '.join(said)} (it holds {self.cap} at most{again})"


def _many(n: int, what: str) -> str:
    return f"{n:,} {what}" + ("" if n == 1 else "s")


class _LimitedH11(H11Protocol):
    """uvicorn's HTTP/1.1 protocol that tells a ``ConnectionLimiter`` of its life.

    Its hooks are the h11 protocol's own methods and state (``handle_events`` after bytes are
    parsed, ``on_response_complete``, ``cycle``): h11 is the one parser uvicorn always has, so
    the page's server does not change with what else is installed (httptools).
    """

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
        limiter: ConnectionLimiter[Connection],
    ) -> None:
        super().__init__(config, server_state, app_state, loop)
        self._limiter = limiter

    def hang_up(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        out = self._limiter.opened(self)
        if out is not None:
            out.hang_up()

    def data_received(self, data: bytes) -> None:
        self._limiter.heard(self)
        super().data_received(data)

    def handle_events(self) -> None:
        super().handle_events()
        cycle: RequestResponseCycle | None = self.cycle
        if cycle is not None and not cycle.response_complete and not self.transport.is_closing():
            self._limiter.busy(self)

    def on_response_complete(self) -> None:
        # before the next pipelined request, which the call below may start (and mark busy)
        if not self.transport.is_closing():
            self._limiter.idle(self)
        super().on_response_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        self._limiter.closed(self)
        super().connection_lost(exc)


class LimitedServer(uvicorn.Server):
    """uvicorn's server on ``sock`` (bound and listening already), accepting by itself: each
    connection is held as ``limiter`` says, refused ones are closed as they are accepted (no
    protocol, no task), accept errors (out of descriptors) pause accepting for
    ``ACCEPT_PAUSE_S``, and ``say`` gets ``limiter``'s notices, a line a minute at most."""

    def __init__(
        self,
        config: uvicorn.Config,
        sock: socket.socket,
        limiter: ConnectionLimiter[Connection],
        say: Callable[[str], None],
    ) -> None:
        super().__init__(config)
        self.sock = sock
        self.limiter = limiter
        self._say = say
        self._loop: asyncio.AbstractEventLoop | None = None
        #: Accepted sockets being given their protocol (the loop keeps only weak references).
        self._joining: set[asyncio.Task[Any]] = set()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await self.lifespan.startup()
        self._loop = asyncio.get_running_loop()
        self.servers = []  # none of asyncio's: the accepting is ours
        self.sock.setblocking(False)
        self._loop.add_reader(self.sock.fileno(), self._accept)
        self.started = True

    async def on_tick(self, counter: int) -> bool:
        for conn in self.limiter.expired():
            conn.hang_up()
        line = self.limiter.notice()
        if line is not None:
            self._say(line)
        return await super().on_tick(counter)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        if self._loop is not None:
            self._loop.remove_reader(self.sock.fileno())
        self.sock.close()
        await super().shutdown(sockets)

    def _protocol(self) -> _LimitedH11:
        assert self._loop is not None
        return _LimitedH11(
            self.config, self.server_state, self.lifespan.state, self._loop, self.limiter
        )

    def _accept(self) -> None:
        loop = self._loop
        assert loop is not None
        for _ in range(ACCEPT_BATCH):
            try:
                conn, _ = self.sock.accept()
            except (BlockingIOError, InterruptedError, ConnectionAbortedError):
                return  # none left
            except OSError as exc:
                # asyncio's own loop logs a traceback per try here and tries again at once
                self.limiter.unaccepted(str(exc))
                loop.remove_reader(self.sock.fileno())
                loop.call_later(ACCEPT_PAUSE_S, self._resume)
                return
            if self.limiter.full():
                self.limiter.refuse()
                conn.close()
                continue
            task = loop.create_task(self._join(loop, conn))
            self._joining.add(task)
            task.add_done_callback(self._joining.discard)

    def _resume(self) -> None:
        if self._loop is not None and self.sock.fileno() >= 0 and not self.should_exit:
            self._loop.add_reader(self.sock.fileno(), self._accept)

    async def _join(self, loop: asyncio.AbstractEventLoop, conn: socket.socket) -> None:
        try:
            await loop.connect_accepted_socket(self._protocol, conn)
        except OSError:
            conn.close()  # gone before it was served: nothing to tell


__all__ = [
    "ACCEPT_BATCH",
    "BACKLOG",
    "FD_SHARE",
    "HEAD_TIMEOUT_S",
    "IDLE_TIMEOUT_S",
    "MAX_CONNECTIONS",
    "NOTICE_EVERY_S",
    "Connection",
    "ConnectionLimiter",
    "LimitedServer",
    "connection_cap",
]
