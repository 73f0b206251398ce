"""Round trips to a device clock over a real process boundary (a Unix SEQPACKET socket pair).

In: a socket whose other end runs ``serve_clock``. Out: ``Exchanges`` (t1 ns, device ticks, t3 ns);
``EmulatedCounter`` runs an emulated clock in a forked child and checks fits against its truth.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.process import BaseProcess
from types import TracebackType
from typing import Any

import numpy as np

from streamscope.core.clock import Clock
from streamscope.core.errors import ConfigError
from streamscope.core.process import die_with_parent
from streamscope.timebase.calibration import Exchanges, Fit, fit
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec, TruthCheck, check_truth

__all__ = [
    "EmulatedCalibration",
    "EmulatedCounter",
    "assess",
    "calibrate_emulated",
    "clock_socketpair",
    "exchange",
    "serve_clock",
]

# Requests are one SEQPACKET message: an op byte, and for a spec switch its epoch and spec text.
# Every reply is exactly one 8-byte little-endian int64 (no pickle anywhere).
_READ = b"r"
_SPEC = b"s"  # + int64 epoch host ns + UTF-8 EmulatedClockSpec text
_STOP = b"q"  # no reply; the responder returns
_REFUSED = -(2**63)  # the reply to a request the responder cannot serve
_MAX_REQUEST = 4096
_EPOCH = struct.Struct("<q")


def clock_socketpair() -> tuple[socket.socket, socket.socket]:
    """A connected (host end, device end) pair carrying the round-trip protocol."""
    return socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)


def serve_clock(sock: socket.socket, clock: Clock) -> None:
    """Answer round-trip requests on ``sock`` with ``clock``'s readings until stopped or EOF.

    Run it in a thread of a device process (it blocks in ``recv``, releasing the GIL). A spec switch
    is honoured only when ``clock`` is an ``EmulatedClock``; anything else is refused, not fatal.
    The switched-to clock lives only in this loop: ``clock`` itself is never modified.
    """
    if sock.type != socket.SOCK_SEQPACKET:
        raise ValueError("serve_clock needs a SOCK_SEQPACKET socket (see clock_socketpair)")
    request = bytearray(_MAX_REQUEST)
    recv_into = sock.recv_into
    send = sock.send
    now_ticks = clock.now_ticks
    read = _READ[0]
    while True:
        n = recv_into(request)
        if n == 0 or request[0] == _STOP[0]:
            return
        if request[0] == read and n == 1:
            # Read the clock as late as possible after the request and reply at once.
            send(now_ticks().to_bytes(8, "little", signed=True))
            continue
        reply = _REFUSED
        if request[0] == _SPEC[0] and n > 1 + _EPOCH.size and isinstance(clock, EmulatedClock):
            (epoch,) = _EPOCH.unpack_from(request, 1)
            text = bytes(request[1 + _EPOCH.size : n]).decode("utf-8", "replace")
            with contextlib.suppress(ConfigError):  # refused: the responder lives on
                clock = EmulatedClock(EmulatedClockSpec.parse(text), epoch, domain=clock.domain)
                now_ticks = clock.now_ticks
                reply = now_ticks()
        send(reply.to_bytes(8, "little", signed=True))


def exchange(
    sock: socket.socket, n: int = 1000, *, now: Callable[[], int] = time.monotonic_ns
) -> Exchanges:
    """``n`` round trips on ``sock``: host ns before the send (t1), the device's ticks (t2), host
    ns after the reply arrived (t3). ``now`` must be the clock the fit maps onto (host monotonic)."""
    if n < 1:
        raise ValueError(f"exchange needs n >= 1 round trips, got {n}")
    t1 = [0] * n
    t2 = [0] * n
    t3 = [0] * n
    reply = bytearray(8)
    send = sock.send
    recv_into = sock.recv_into
    from_bytes = int.from_bytes
    # A Python loop on purpose: each iteration is one blocking round trip, nothing to vectorise,
    # and the fewer operations between now() and the syscalls, the tighter the bounds.
    for i in range(n):
        a = now()
        send(_READ)
        got = recv_into(reply)
        b = now()
        if got != 8:
            raise _lost(got)
        t1[i] = a
        t3[i] = b
        t2[i] = from_bytes(reply, "little", signed=True)
    return Exchanges(
        t1_ns=np.array(t1, dtype=np.int64),
        t2_ticks=np.array(t2, dtype=np.int64),
        t3_ns=np.array(t3, dtype=np.int64),
    )


def _lost(got: int) -> ConnectionError:
    if got == 0:
        return ConnectionError("the device clock closed its end of the round-trip socket")
    return ConnectionError(f"the device clock sent a {got}-byte reply (expected 8)")


def _die_with_parent(parent_pid: int) -> None:
    # EOF on the socket already ends the child when the parent exits; PR_SET_PDEATHSIG also covers
    # a parent killed while some other forked process still holds the host end open.
    die_with_parent(parent_pid, signal.SIGKILL)


def _device_main(
    device_end: socket.socket, host_end: socket.socket, clock: EmulatedClock, parent_pid: int
) -> None:
    """Entry point of the forked device process: serve the clock until stopped or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what Ctrl-C means
    host_end.close()  # so that the parent's exit reads as EOF here
    _die_with_parent(parent_pid)
    serve_clock(device_end, clock)


class EmulatedCounter:
    """An emulated device clock answering round trips from a forked child process.

    ``clock`` is the host's copy of the child's clock (same spec and epoch): the truth, for
    validation. Use as a context manager; the child never outlives the block or this process
    (PR_SET_PDEATHSIG follows the thread that forked it: start it from one that outlives it).
    A device that misses ``timeout_s`` is closed: a late reply would shift every later exchange.
    """

    def __init__(
        self,
        spec: EmulatedClockSpec | None = None,
        *,
        epoch_host_ns: int | None = None,
        timeout_s: float = 5.0,
    ) -> None:
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be > 0, got {timeout_s}")
        epoch = time.monotonic_ns() if epoch_host_ns is None else epoch_host_ns
        self.clock = EmulatedClock(spec or EmulatedClockSpec(), epoch)
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._proc: BaseProcess | None = None

    @property
    def spec(self) -> EmulatedClockSpec:
        return self.clock.spec

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> EmulatedCounter:
        if self._proc is not None:
            return self
        host_end, device_end = clock_socketpair()
        # A kernel receive timeout instead of socket.settimeout: Python would poll() before every
        # recv, adding a syscall to each round trip.
        sec = int(self.timeout_s)
        usec = int((self.timeout_s - sec) * 1e6)
        host_end.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", sec, usec))
        ctx = mp.get_context("fork")
        proc = ctx.Process(
            target=_device_main,
            args=(device_end, host_end, self.clock, os.getpid()),
            name="streamscope-emulated-device",
            daemon=True,
        )
        try:
            proc.start()
        except BaseException:
            host_end.close()
            raise
        finally:
            device_end.close()
        self._sock, self._proc = host_end, proc
        try:  # the child is up; its first, slow (cold) reply is not part of any burst
            self.exchange(1)
        except BaseException:
            self.close()  # `with` does not call __exit__ when __enter__ raised
            raise
        return self

    def _socket(self) -> socket.socket:
        if self._sock is None:
            raise RuntimeError("the emulated device is not running (use it in a `with` block)")
        return self._sock

    def exchange(self, n: int = 1000) -> Exchanges:
        """``n`` round trips to the device (see ``exchange``)."""
        try:
            return exchange(self._socket(), n)
        except BlockingIOError:
            raise self._timed_out() from None

    def _timed_out(self) -> TimeoutError:
        self.close()
        return TimeoutError(f"the emulated device did not answer within {self.timeout_s} s")

    def set_spec(
        self, spec: EmulatedClockSpec, *, epoch_host_ns: int | None = None
    ) -> EmulatedClock:
        """Switch the device to ``spec`` from ``epoch_host_ns`` (default now); returns the truth."""
        sock = self._socket()
        epoch = time.monotonic_ns() if epoch_host_ns is None else epoch_host_ns
        sock.send(_SPEC + _EPOCH.pack(epoch) + str(spec).encode())
        reply = bytearray(8)
        try:
            got = sock.recv_into(reply)
        except BlockingIOError:
            raise self._timed_out() from None
        if got != 8:
            raise _lost(got)
        if int.from_bytes(reply, "little", signed=True) == _REFUSED:
            raise RuntimeError(f"the emulated device refused the clock spec {str(spec)!r}")
        self.clock = EmulatedClock(spec, epoch)
        return self.clock

    def close(self) -> None:
        """Stop the child (asking first, then terminating, then killing) and close the socket."""
        sock, proc = self._sock, self._proc
        self._sock = self._proc = None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.send(_STOP)
            sock.close()
        if proc is not None:
            proc.join(timeout=1.0)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=1.0)
            if proc.is_alive():
                proc.kill()
                proc.join()
            proc.close()

    def __enter__(self) -> EmulatedCounter:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class EmulatedCalibration:
    """One calibration against an emulated device: the fit, and how it compares with the truth."""

    spec: EmulatedClockSpec
    fit: Fit
    truth: TruthCheck
    bound_width_ns: float
    rtt_median_ns: float

    def to_dict(self) -> dict[str, Any]:
        return {
            **self.fit.to_dict(),
            "spec": str(self.spec),
            "bound_width_ns": self.bound_width_ns,
            "rtt_median_ns": self.rtt_median_ns,
            **self.truth.to_dict(),
        }


def calibrate_emulated(
    spec: EmulatedClockSpec, *, n: int = 1000, method: str = "hull"
) -> EmulatedCalibration:
    """Start an emulated device with ``spec``, do ``n`` round trips, fit with ``method``, and check
    the truth at 1001 positions across the burst's tick span."""
    with EmulatedCounter(spec) as device:
        ex = device.exchange(n)
        truth_clock = device.clock
    return assess(ex, fit(ex, method), truth_clock)


def assess(ex: Exchanges, f: Fit, truth_clock: EmulatedClock) -> EmulatedCalibration:
    """Compare fit ``f`` of exchanges ``ex`` with the emulated truth across the burst's tick span."""
    return EmulatedCalibration(
        spec=truth_clock.spec,
        fit=f,
        truth=check_truth(f, truth_clock),
        bound_width_ns=float(f.bound_width_ns()),
        rtt_median_ns=float(np.median(ex.t3_ns - ex.t1_ns)),
    )
