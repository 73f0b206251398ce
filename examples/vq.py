"""Virtual-queue micro-benchmarks (seed 002): a source, a server and a sink, with the channel
``source -> server`` crossing between the host and an emulated device over a bulk-transfer link.

Only the two buffers at the ends of that channel are visible; streamscope estimates the whole
queue's occupancy by simulation and checks its model against the buffers. Run with
``--ground-truth`` to record every item's true times and see the estimate's distance to the truth.
The ``vq_*.py`` files pick the placement and the distributions; all take the same options.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

import streamscope as ss
from mm1 import sleep_until

QUERIES = ["occupancy(source -> server): mean, max, histogram every 1s"]

# The source, the bus's mover and the agent share the device's interpreter: hand its lock over
# every 0.2 ms rather than every 5 ms, so a stage keeps the pace its gaps and services ask for.
sys.setswitchinterval(0.0002)


def gaps(kind: str, n: int, mean_ns: float, seed: int, phi: float) -> np.ndarray:
    """Inter-insertion times (ns): i.i.d. exponential, or log-normal with AR(1) log-gaps
    (correlation ``phi`` between consecutive gaps' logs: long bursts and long lulls)."""
    rng = np.random.default_rng(seed)
    if kind == "exp":
        return rng.exponential(mean_ns, n)
    sigma = 1.0
    z = np.empty(n)
    eps = rng.standard_normal(n) * np.sqrt(1.0 - phi * phi)
    z[0] = rng.standard_normal()
    for k in range(1, n):
        z[k] = phi * z[k - 1] + eps[k]
    return mean_ns * np.exp(sigma * z - 0.5 * sigma * sigma)


class Source:
    def __init__(self, gaps_ns: np.ndarray) -> None:
        self.gaps = gaps_ns.astype(np.int64)

    def generate(self):  # type: ignore[no-untyped-def]
        deadline = time.monotonic_ns()
        for k in range(len(self.gaps)):
            deadline += int(self.gaps[k])
            sleep_until(deadline)
            yield k
            now = time.monotonic_ns()
            if now - deadline > 200_000:  # blocked on a full buffer: the next gap starts now
                deadline = now


class Server:
    def __init__(self, service_ns: np.ndarray) -> None:
        self.service = service_ns.astype(np.int64)
        self.k = 0

    def process(self, item: int) -> int:
        start = time.monotonic_ns()
        sleep_until(start + int(self.service[self.k % len(self.service)]))
        self.k += 1
        return item


def build(
    argv: list[str],
    *,
    device: str,
    arrivals: str,
    service: str,
    name: str,
    rho: float = 0.7,
    phi: float = 0.9,
) -> ss.Pipeline:
    """``device``: which stage runs on the device (``server``: software -> hardware, the
    server and sink there; ``source``: hardware -> software)."""
    ap = argparse.ArgumentParser(prog=f"{name}.py", description=__doc__)
    ap.add_argument("--items", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--rho", type=float, default=rho, help="utilisation of the server")
    ap.add_argument("--service-ms", type=float, default=1.0, help="mean service time (ms)")
    ap.add_argument("--capacity", type=int, default=256, help="each buffer's places")
    ap.add_argument("--bulk", type=int, default=16, help="items per bus transfer")
    ap.add_argument("--transfer-us", type=float, default=400.0, help="bus time per transfer")
    ap.add_argument("--latency-us", type=float, default=100.0, help="in flight per transfer")
    ap.add_argument(
        "--timeout-ms", type=float, default=8.0, help="flush a partial transfer after this idle"
    )
    ap.add_argument("--phi", type=float, default=phi, help="AR(1) correlation (correlated)")
    a = ap.parse_args(argv)
    if not (a.rho > 0 and a.items > 0 and a.service_ms > 0):
        ap.error("--rho, --items and --service-ms must be positive")
    mean_service = a.service_ms * 1e6
    rng = np.random.default_rng(a.seed + 10_000)
    if service == "exp":
        svc = rng.exponential(mean_service, a.items)
    else:
        svc = np.full(a.items, mean_service)
    dev = ss.EmulatedDevice(
        "accel",
        bulk_size=a.bulk,
        transfer_us=a.transfer_us,
        latency_us=a.latency_us,
        timeout_us=a.timeout_ms * 1e3,
    )
    on = {"source": "thread", "server": "thread", "sink": "thread"}
    if device == "server":
        on["server"] = on["sink"] = dev  # type: ignore[assignment]
    else:
        on["source"] = dev  # type: ignore[assignment]
    p = ss.Pipeline(name)
    p.add("source", Source(gaps(arrivals, a.items, mean_service / a.rho, a.seed, a.phi)),
          resource=on["source"])  # fmt: skip
    p.add("server", Server(svc), resource=on["server"])
    p.add("sink", lambda item: None, resource=on["sink"])
    p.connect("source", "server", capacity=a.capacity)
    p.connect("server", "sink", capacity=a.capacity)
    return p


__all__ = ["QUERIES", "build"]
