"""Calibration bursts between the host and each clock domain of a run.

In: each domain's clock link (the host end of its round-trip socket, or a cluster host's clock
responder). Out: CALIBRATION messages (one burst of
exchanges each) on the control link: a full burst when the domain starts, short bursts every
``every_s`` while it runs, and a full burst when its stages are done, before it exits.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from streamscope.timebase.burst import Exchanges
from streamscope.timebase.roundtrip import exchange
from streamscope.transport.control import Control

#: Exchanges in the bursts at a domain's start and end, and in the short periodic ones.
FULL_BURST = 1000
SHORT_BURST = 100
#: Seconds between short bursts (0: none while the run goes on).
EVERY_S = 2.0
#: Seconds after the start of the first extra short bursts (those before ``every_s``).
EARLY_S = (0.25, 1.0)
_STOP = b"q"


class ClockLink(Protocol):
    """How the host reads a domain's clock: ``exchange`` makes ``n`` round trips (OSError once
    the domain is gone), ``release`` lets its responder go, ``close`` forgets the link.
    ``full``/``short``: the most round trips its full and short bursts make (a slow link's
    bursts are shorter: the best of fewer round trips is nearly as good)."""

    full: int
    short: int

    def exchange(self, n: int) -> Exchanges: ...

    def release(self) -> None: ...

    def close(self) -> None: ...


class SocketClock:
    """A clock link over the socket a domain's counter process answers on."""

    full = FULL_BURST
    short = SHORT_BURST

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def exchange(self, n: int) -> Exchanges:
        return exchange(self.sock, n)

    def release(self) -> None:
        self.sock.send(_STOP)

    def close(self) -> None:
        self.sock.close()


@dataclass(slots=True)
class _Domain:
    """One clock domain's link. Mutable: ``closed`` is set once its process is gone or
    released, under ``lock``."""

    index: int  # the domain's resource index in the topology (sent as the message's agent field)
    name: str
    link: ClockLink
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


class Calibrator:
    """Runs bursts for every clock domain; ``finish(name)`` does the last one and lets it go."""

    def __init__(
        self,
        control: Control,
        domains: list[tuple[int, str, socket.socket | ClockLink]],
        *,
        every_s: float = EVERY_S,
        full: int = FULL_BURST,
        short: int = SHORT_BURST,
        on_burst: Callable[[str, Exchanges], None] | None = None,
    ) -> None:
        self.control = control
        self.domains = {
            name: _Domain(i, name, SocketClock(link) if isinstance(link, socket.socket) else link)
            for i, name, link in domains
        }
        self.every_s = every_s
        self.full = full
        self.short = short
        self.bursts = 0
        self.on_burst = on_burst  #: sees each burst too (the runner's frame grid for devices)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="streamscope-calibrator", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def _burst(self, d: _Domain, n: int) -> None:
        with d.lock:
            if d.closed:
                return
            try:
                ex = d.link.exchange(n)
            except OSError:
                d.closed = True  # the domain's process is gone (stopped or failed)
                return
        self.control.send_calibration(d.index, ex.t1_ns, ex.t2_ticks, ex.t3_ns)
        self.bursts += 1
        if self.on_burst is not None:
            self.on_burst(d.name, ex)

    def _loop(self) -> None:
        domains = list(self.domains.values())
        if len(domains) > 1:
            # Every domain placeable soon: a short burst each before the full ones (full
            # bursts one domain after another would leave the last of many hosts without a
            # fit for seconds, and what it sends meanwhile waits; lost then, it is never placed).
            for d in domains:
                self._burst(d, min(self.short, d.link.short))
        for d in domains:
            self._burst(d, min(self.full, d.link.full))
        # Two early short bursts fix each domain's rate soon (a device reducing its own frames
        # places them with it); then the regular ones.
        waited = 0.0
        for at in EARLY_S:
            if self.every_s <= 0 or at >= self.every_s or self._stop.wait(at - waited):
                break
            waited = at
            for d in list(self.domains.values()):
                self._burst(d, min(self.short, d.link.short))
        if waited and self._stop.wait(self.every_s - waited):
            return
        while self.every_s > 0 and not self._stop.wait(self.every_s):
            for d in list(self.domains.values()):
                self._burst(d, min(self.short, d.link.short))

    def finish(self, name: str, short: bool = False) -> None:
        """The domain's stages are done: a last full burst (``short``: a short one), then
        release its clock responder."""
        d = self.domains.get(name)
        if d is None:
            return
        self._burst(d, min(self.short, d.link.short) if short else min(self.full, d.link.full))
        with d.lock:
            if not d.closed:
                with contextlib.suppress(OSError):
                    d.link.release()
                d.closed = True

    def finish_all(self) -> None:
        """The run stops early (a stage failed, a host was lost, Ctrl-C): a last short burst
        of every domain still answering, so that the records it sent so far can be placed in
        time (between two bursts: a short one does), then let each go. The domains' bursts
        go at once (the stop waits for them: one after another, a cluster's hosts took
        seconds)."""
        bursts = [
            threading.Thread(target=self.finish, args=(name, True), daemon=True)
            for name in list(self.domains)
        ]
        for t in bursts:
            t.start()
        for t in bursts:
            t.join()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        for d in self.domains.values():
            with contextlib.suppress(OSError):
                d.link.close()
