"""The monitor's clock domains: calibration bursts in, tick → virtual-ns conversion out.

In: CALIBRATION messages (one burst of round trips per message) and record batches in raw ticks
of their agent's domain. Out: virtual ns since the run's start, each batch with the half-width of
its hard bounds, and the fits and raw exchanges for the run file. The host domain is the
reference: its map is exact.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.topology import Topology
from streamscope.timebase.calibration import ClockModel, Exchanges, Fit, fit
from streamscope.timebase.clockmap import HostMap

TableSink = Callable[[str, dict[str, Any]], None]
HOST = "host"


class Domains:
    """Maps of every clock domain of a run, refitted as each burst arrives."""

    def __init__(
        self,
        topology: Topology,
        on_table: TableSink | None = None,
        *,
        method: str = "hull",
        drift_ppb_per_s: float = 100.0,
    ) -> None:
        self.by_index = [r.clock_domain for r in topology.resources]
        self.tick_ns = {r.clock_domain: r.tick_period_ns for r in topology.resources}
        self.host: HostMap | None = None
        self.fits: dict[str, list[Fit]] = {}
        self.models: dict[str, ClockModel] = {}
        self.method = method
        self.drift_ppb_per_s = drift_ppb_per_s
        self._on_table = on_table

    def start(self, t0_ticks: int) -> None:
        self.host = HostMap(t0_ticks)

    def ready(self, domain: str) -> bool:
        return self.host is not None and (domain == HOST or domain in self.models)

    def calibrate(self, domain_index: int, rows: NDArray[Any]) -> str:
        """Fit one burst of domain ``domain_index``; returns the domain's name."""
        domain = self.by_index[domain_index] if 0 <= domain_index < len(self.by_index) else ""
        if not domain or domain == HOST:
            return ""
        ex = Exchanges(
            t1_ns=rows["t1_ns"].astype(np.int64),
            t2_ticks=rows["t2_ticks"].astype(np.int64),
            t3_ns=rows["t3_ns"].astype(np.int64),
        )
        f = fit(ex, self.method)
        burst = len(self.fits.setdefault(domain, []))
        self.fits[domain].append(f)
        self.models[domain] = ClockModel(
            self.fits[domain],
            drift_ppb_per_s=self.drift_ppb_per_s,
            tick_period_ns=self.tick_ns.get(domain, 1.0),
        )
        if self._on_table is not None:
            n = len(ex.t1_ns)
            self._on_table(
                "calibration",
                {"domain": [domain] * n, "burst": [burst] * n, "t1_ns": ex.t1_ns,
                 "t2_ticks": ex.t2_ticks, "t3_ns": ex.t3_ns},
            )  # fmt: skip
            self._on_table("clock_fit", fit_row(domain, burst, f))
        return domain

    def to_ns(self, domain: str, ticks: NDArray[np.int64]) -> tuple[NDArray[np.int64], float]:
        """Virtual ns since the run's start, and the largest half-width of the bounds used."""
        assert self.host is not None
        if domain == HOST:
            return self.host.to_ns(ticks), 0.0
        model = self.models[domain]
        host_ns = model.to_ns(ticks)
        t = np.rint(host_ns - float(self.host.t0_ticks)).astype(np.int64)
        if not len(ticks):
            return t, 0.0
        ends = np.array([ticks.min(), ticks.max()], dtype=np.int64)
        lo, hi = model.bounds(ends)
        return t, float(np.max(np.asarray(hi) - np.asarray(lo)) / 2.0)

    def scalar_to_ns(self, domain: str, ticks: int) -> int:
        assert self.host is not None
        if domain == HOST:
            return self.host.scalar_to_ns(ticks)
        host_ns = float(np.asarray(self.models[domain].to_ns(np.array([ticks], np.int64)))[0])
        return round(host_ns - self.host.t0_ticks)


def fit_row(domain: str, burst: int, f: Fit) -> dict[str, Any]:
    """One ``clock_fit`` table row for a burst's fit."""
    return {
        "domain": [domain], "burst": [burst], "method": [f.method], "x0_ticks": [f.x0_ticks],
        "s_ns_per_tick": [f.s_ns_per_tick], "b_ns": [f.b_ns], "feasible": [f.feasible],
        "n": [f.n], "rtt_min_ns": [f.rtt_min_ns], "bound_width_ns": [f.bound_width_ns()],
        "residual_rms_ns": [f.residual_rms_ns],
    }  # fmt: skip
