"""Transports that carry encoded messages from agents to the monitor.

In: bytes from ``wire.encode``. Out: the same bytes at the monitor, in order per sender.
``InMemoryTransport`` serves one process; ``UnixSocketTransport`` crosses processes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Protocol


class Transport(Protocol):
    """Agent side of a link to the monitor. ``send`` must be safe from one thread at a time."""

    def send(self, data: bytes) -> None: ...

    def close(self) -> None: ...


class Sink(Protocol):
    """Anything messages can be put into (a ``queue.SimpleQueue`` of the monitor's inbox)."""

    def put(self, item: bytes | None, /) -> None: ...


class InMemoryTransport:
    """Hands messages to a monitor in the same process through a queue (``None`` = closed)."""

    def __init__(self, sink: Sink) -> None:
        self._sink = sink

    def send(self, data: bytes) -> None:
        self._sink.put(data)

    def close(self) -> None:
        self._sink.put(None)


class UnixSocketTransport:
    """A stream connection to the monitor's Unix socket. Messages are self-delimiting."""

    def __init__(self, path: str) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(path)
        self._lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self._lock:
            self._sock.sendall(data)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_WR)
        self._sock.close()
