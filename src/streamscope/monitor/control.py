"""The monitor's end of the control link: connections from the application's processes.

In: a listening Unix socket (or none: the application is this process). Out: each connection's
messages, decoded, in one bounded inbox (a reader blocks when it is full: back pressure), and a
``Disconnect`` when a connection closes. A connection that sends what cannot be decoded is
dropped and said; the run goes on.
"""

from __future__ import annotations

import contextlib
import os
import queue
import socket
import sys
import threading
from dataclasses import dataclass

from streamscope.transport.wire import (
    HEADER_SIZE,
    Message,
    WireError,
    decode_header,
    decode_payload,
)

#: Control messages waiting to be handled, at most (a reader blocks beyond: back pressure).
INBOX_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Agent ``agent``'s connection closed: it will send nothing more."""

    agent: int


#: Encoded messages (from this process), decoded ones, closed connections; None: the
#: application's own link closed.
Inbox = queue.Queue[bytes | Message | Disconnect | None]


class ControlServer:
    """Accepts connections on ``listener`` (or binds ``socket_path``) and reads each in a
    thread of its own into ``inbox``."""

    def __init__(
        self, inbox: Inbox, listener: socket.socket | None, socket_path: str | None
    ) -> None:
        self.inbox = inbox
        self.socket_path = socket_path
        self.bad_messages = 0
        self._server = listener
        #: The listening socket is this server's own (bound here, not handed over by a parent).
        self._own = listener is None
        self._acceptor: threading.Thread | None = None
        if self._server is None and socket_path is not None:
            self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._server.bind(socket_path)
            os.chmod(socket_path, 0o600)
            self._server.listen(64)
        if self._server is not None:
            self._acceptor = threading.Thread(
                target=self._accept, name="streamscope-accept", daemon=True
            )
            self._acceptor.start()

    def _accept(self) -> None:
        server = self._server  # ``close`` lets go of it while this waits
        assert server is not None
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        agent: int | None = None
        try:
            while True:
                header = _read_exact(conn, HEADER_SIZE)
                if header is None:
                    break
                kind, agent_id, pid, wm, length, count = decode_header(header)
                payload = _read_exact(conn, length) if length else b""
                if payload is None:
                    break
                agent = agent_id
                self.inbox.put(decode_payload(kind, agent_id, pid, wm, count, payload))
        except (WireError, OSError) as exc:
            self.bad_messages += 1
            print(f"streamscope monitor: dropped a connection: {exc}", file=sys.stderr)
        finally:
            conn.close()
            if agent is not None:
                self.inbox.put(Disconnect(agent))

    def close(self) -> None:
        """Stop accepting: the accepting thread ends (a monitor in the program's own process
        would otherwise leave one behind per run, blocked in ``accept`` for good: closing a
        socket does not wake a thread blocked on it, shutting it down does)."""
        if self._server is not None:
            if self._own:  # a socket handed over is its maker's to shut down
                with contextlib.suppress(OSError):
                    self._server.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._server.close()
            if self.socket_path is not None:
                with contextlib.suppress(OSError):
                    os.unlink(self.socket_path)
            self._server = None
        if self._own and self._acceptor is not None:
            self._acceptor.join(5.0)


def _read_exact(conn: socket.socket, n: int) -> bytes | None:
    buf = bytearray()
    while len(buf) < n:
        chunk = conn.recv(min(n - len(buf), 1 << 20))
        if not chunk:
            return None
        buf += chunk
    return bytes(buf)
