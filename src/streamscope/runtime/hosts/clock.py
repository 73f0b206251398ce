"""Every host a timezone: each host's clock read by round trips from the monitor's host, over the
cluster's own calls, for the same fits and bounds as a device's clock.

In: a started ``RayCluster`` and, per host, the clock its stages read (its monotonic clock, or
an emulated one with a rate, offset, drift and tick the monitor is not told: for tests on one
machine). Out: per host, ``Exchanges`` (host ns before the call, the host's ticks, host ns after
the reply) that ``timebase`` fits like any other domain's.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from streamscope.core.clock import HostClock
from streamscope.runtime.hosts.cluster import RayCluster
from streamscope.timebase.calibration import Exchanges
from streamscope.timebase.emulated import EmulatedClock, EmulatedClockSpec


class ClockResponder:
    """Runs on a host's node: answers each call with that host's clock reading (an actor)."""

    def __init__(self, spec: str = "", epoch_ns: int = 0) -> None:
        self.clock: Any = None
        self.configure(spec, epoch_ns)

    def configure(self, spec: str, epoch_ns: int) -> None:
        """Read ``spec``'s emulated clock from ``epoch_ns`` on (empty: the host's own)."""
        self.clock = EmulatedClock(EmulatedClockSpec.parse(spec), epoch_ns) if spec else HostClock()

    def read(self) -> int:
        return int(self.clock.now_ticks())


#: A round trip that takes longer than this (seconds) is a host that does not answer.
ROUND_TRIP_TIMEOUT_S = 2.0


def exchange(ray: Any, responder: Any, n: int, within_s: float | None = None) -> Exchanges:
    """``n`` round trips to a ``ClockResponder`` actor, one call at a time (a Python loop on
    purpose: each is one blocking call, and the less between the readings, the tighter the
    bounds). ``within_s``: the burst ends after that long with the round trips made so far
    (at least two)."""
    if n < 1:
        raise ValueError(f"exchange needs n >= 1 round trips, got {n}")
    read = responder.read
    get = ray.get
    now = time.monotonic_ns
    end = now() + int(within_s * 1e9) if within_s is not None else None
    t1, t2, t3 = np.zeros(n, np.int64), np.zeros(n, np.int64), np.zeros(n, np.int64)
    made = n
    for i in range(n):
        a = now()
        ticks = get(read.remote(), timeout=ROUND_TRIP_TIMEOUT_S)
        b = now()
        t1[i], t2[i], t3[i] = a, ticks, b
        if end is not None and b >= end and i >= 1:
            made = i + 1
            break
    return Exchanges(t1_ns=t1[:made], t2_ticks=t2[:made], t3_ns=t3[:made])


class HostClocks:
    """A clock responder on each host's node. ``specs``: a host's emulated clock (absent or
    empty: its own monotonic clock). The emulated clocks count from ``epoch_ns`` (host
    monotonic ns), so a test can rebuild their truth (``truth``)."""

    def __init__(self, cluster: RayCluster, specs: Mapping[str, str] | None = None) -> None:
        self.cluster = cluster
        self.specs = {h: (specs or {}).get(h, "") for h in cluster.hosts}
        self.epoch_ns = time.monotonic_ns()
        ray = cluster.ray
        actor = ray.remote(ClockResponder)
        self._actors = {
            h: actor.options(**cluster.on_node(h)).remote(spec, self.epoch_ns)
            for h, spec in self.specs.items()
        }
        ray.get([a.read.remote() for a in self._actors.values()])  # each is up

    def exchange(self, host: str, n: int = 200) -> Exchanges:
        """``n`` round trips to ``host``'s clock (see ``exchange``)."""
        return exchange(self.cluster.ray, self._actors[host], n)

    def truth(self, host: str) -> EmulatedClock | None:
        """The emulated clock ``host`` was given (None: its own), for checking fits."""
        spec = self.specs[host]
        return EmulatedClock(EmulatedClockSpec.parse(spec), self.epoch_ns) if spec else None


#: Round trips in a host clock's full and short calibration bursts.
HOST_FULL_BURST = 300
HOST_SHORT_BURST = 60

#: The longest a host clock's burst lasts, per round trip asked for (seconds; a round trip
#: takes ~0.5 ms on an idle machine, milliseconds on a busy one): a run that stops waits for
#: its hosts' last bursts, short ones (0.06 s at most).
BURST_S_PER_TRIP = 0.001


class ClockLink:
    """The calibrator's link to a host's clock responder (a clock link; see ``calibrator``).
    A round trip over the cluster's calls takes ~0.5 ms, ~20 times a socket's: its bursts
    are shorter."""

    full = HOST_FULL_BURST
    short = HOST_SHORT_BURST

    def __init__(self, ray: Any, responder: Any) -> None:
        self._ray = ray
        self._responder = responder

    def exchange(self, n: int) -> Exchanges:
        try:
            return exchange(self._ray, self._responder, n, n * BURST_S_PER_TRIP)
        except self._ray.exceptions.RayError as exc:
            raise OSError(f"the host's clock responder is gone: {exc}") from None

    def release(self) -> None:
        with contextlib.suppress(Exception):
            self._ray.kill(self._responder)

    def close(self) -> None:
        self.release()
