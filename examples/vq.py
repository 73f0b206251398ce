"""Virtual-queue micro-benchmarks (Lancaster et al. 2011): a source, a server and a sink, with the channel
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


#: Inter-insertion kinds (``--arrivals``): four i.i.d. (renewal) sources and four whose gaps
#: depend on each other. Each keeps the mean gap it is given.
ARRIVALS = ("exp", "h2", "det", "lognormal", "onoff", "periodic", "mmpp", "ar1")
#: Service-time kinds (``--service``), each with the mean it is given.
SERVICES = ("exp", "det", "uniform")

#: Items per burst of the "onoff" and "periodic" sources.
ONOFF_BURST = 60
PERIODIC_BURST = 24


def _h2(rng: np.random.Generator, n: int, mean_ns: float, cv2: float = 4.0) -> np.ndarray:
    """Hyperexponential with balanced means and squared coefficient of variation ``cv2``."""
    p = 0.5 * (1.0 + np.sqrt((cv2 - 1.0) / (cv2 + 1.0)))
    fast = rng.random(n) < p
    scale = np.where(fast, mean_ns / (2.0 * p), mean_ns / (2.0 * (1.0 - p)))
    return rng.exponential(1.0, n) * scale


def _ar1_lognormal(rng: np.random.Generator, n: int, mean_ns: float, phi: float) -> np.ndarray:
    sigma = 1.0
    z = np.empty(n)
    eps = rng.standard_normal(n) * np.sqrt(1.0 - phi * phi)
    z[0] = rng.standard_normal()
    for k in range(1, n):
        z[k] = phi * z[k - 1] + eps[k]
    return mean_ns * np.exp(sigma * z - 0.5 * sigma * sigma)


def _onoff(rng: np.random.Generator, n: int, mean_ns: float) -> np.ndarray:
    """Bursts of ONOFF_BURST items (exponential gaps of mean_ns / 16 inside) separated by
    exponential idle gaps that keep the overall mean gap: at rho 0.2 and 1 ms of service
    they average ~280 ms, longer than a 200 ms frame."""
    on = mean_ns / 16.0
    idle = ONOFF_BURST * mean_ns - (ONOFF_BURST - 1) * on
    g = rng.exponential(on, n)
    starts = np.arange(n) % ONOFF_BURST == 0
    g[starts] = rng.exponential(idle, int(starts.sum()))
    return g


def _periodic(rng: np.random.Generator, n: int, mean_ns: float) -> np.ndarray:
    """A burst of PERIODIC_BURST items (exponential gaps of mean_ns / 8) at the start of
    every period of PERIODIC_BURST * mean_ns."""
    nb = -(-n // PERIODIC_BURST)
    inner = rng.exponential(mean_ns / 8.0, (nb, PERIODIC_BURST))
    inner[:, 0] = 0.0
    within = np.cumsum(inner, axis=1).ravel()[:n]
    t = (np.arange(n) // PERIODIC_BURST) * (PERIODIC_BURST * mean_ns) + within
    return np.diff(t, prepend=0.0)


def _mmpp(rng: np.random.Generator, n: int, mean_ns: float) -> np.ndarray:
    """A two-state Markov-modulated Poisson source: 2.4x the mean rate for exponential
    sojourns of mean 25 mean gaps, 0.15x for 41 (rate averages to the mean)."""
    rates = (2.4 / mean_ns, 0.15 / mean_ns)
    stays = (25.0 * mean_ns, 25.0 * mean_ns * 1.4 / 0.85)
    out = np.empty(n)
    state = int(rng.random() < stays[1] / (stays[0] + stays[1]))
    left = rng.exponential(stays[state])
    gap = 0.0
    k = 0
    while k < n:  # a loop: each draw depends on the state the previous one left
        g = rng.exponential(1.0 / rates[state])
        if g < left:
            left -= g
            out[k] = gap + g
            gap = 0.0
            k += 1
        else:  # memoryless: the state switches, the next draw starts from the switch
            gap += left
            state = 1 - state
            left = rng.exponential(stays[state])
    return out


def gaps(kind: str, n: int, mean_ns: float, seed: int, phi: float) -> np.ndarray:
    """Inter-insertion times (ns) with mean ``mean_ns``, one of :data:`ARRIVALS`: i.i.d.
    exponential, hyperexponential (CV^2 = 4), deterministic or log-normal (sigma 1); on/off
    bursts, periodic bursts, Markov-modulated Poisson, or log-normal with AR(1) log-gaps
    (correlation ``phi`` between consecutive gaps' logs: long bursts and long lulls)."""
    rng = np.random.default_rng(seed)
    if kind == "exp":
        return rng.exponential(mean_ns, n)
    if kind == "h2":
        return _h2(rng, n, mean_ns)
    if kind == "det":
        return np.full(n, mean_ns)
    if kind == "lognormal":
        return mean_ns * np.exp(rng.standard_normal(n) - 0.5)
    if kind == "onoff":
        return _onoff(rng, n, mean_ns)
    if kind == "periodic":
        return _periodic(rng, n, mean_ns)
    if kind == "mmpp":
        return _mmpp(rng, n, mean_ns)
    return _ar1_lognormal(rng, n, mean_ns, phi)


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
    ap.add_argument(
        "--arrivals", choices=ARRIVALS, default=arrivals, help="inter-insertion kind (see gaps)"
    )
    ap.add_argument(
        "--service", choices=SERVICES, default=service,
        help="service-time kind: exp, det, or uniform over [0.4, 1.4] x the mean / 0.9",
    )  # fmt: skip
    ap.add_argument(
        "--device-clock", default=None,
        help="the device's emulated clock spec (e.g. rate_ppm=-60,offset_s=2,tick_ns=7.5)",
    )  # fmt: skip
    a = ap.parse_args(argv)
    if not (a.rho > 0 and a.items > 0 and a.service_ms > 0):
        ap.error("--rho, --items and --service-ms must be positive")
    mean_service = a.service_ms * 1e6
    rng = np.random.default_rng(a.seed + 10_000)
    if a.service == "exp":
        svc = rng.exponential(mean_service, a.items)
    elif a.service == "uniform":
        svc = rng.uniform(0.4, 1.4, a.items) * (mean_service / 0.9)
    else:
        svc = np.full(a.items, mean_service)
    clock = {} if a.device_clock is None else {"clock": a.device_clock}
    dev = ss.EmulatedDevice(
        "accel",
        **clock,
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
    p.add("source", Source(gaps(a.arrivals, a.items, mean_service / a.rho, a.seed, a.phi)),
          resource=on["source"])  # fmt: skip
    p.add("server", Server(svc), resource=on["server"])
    p.add("sink", lambda item: None, resource=on["sink"])
    p.connect("source", "server", capacity=a.capacity)
    p.connect("server", "sink", capacity=a.capacity)
    return p


__all__ = ["ARRIVALS", "QUERIES", "SERVICES", "build", "gaps"]
