"""The one tick → virtual-ns conversion of a run: a ``ClockMap`` per clock domain, refitted as
each calibration burst arrives.

In: calibration bursts (round trips, one burst at a time, live in the monitor or read back from
a run file) and raw ticks of a domain. Out: virtual ns since the run's start, with the half-width
of their hard bounds (per batch, or per tick), and the fits and raw exchanges for the run file.
The host domain is the reference: its map is exact. Everything that places records in time (the
monitor, ``retime``, the exports) goes through here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.core.tablerows import TableRows, TableSink
from streamscope.core.topology import HOST, Topology
from streamscope.timebase.calibration import ClockModel, Exchanges, Fit, fit
from streamscope.timebase.clockmap import ClockMap, FittedMap, HostMap, NominalMap

__all__ = ["Domains", "fit_row"]


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
        self.tick_ns = topology.tick_periods()
        self.host: HostMap | None = None
        self.fits: dict[str, list[Fit]] = {}
        self.models: dict[str, ClockModel] = {}
        self._maps: dict[str, FittedMap] = {}
        self.method = method
        self.drift_ppb_per_s = drift_ppb_per_s
        self._on_table = on_table

    def start(self, t0_ticks: int) -> None:
        self.host = HostMap(t0_ticks)
        self._maps = {d: FittedMap(m, t0_ticks) for d, m in self.models.items()}

    def map(self, domain: str) -> ClockMap:
        """``domain``'s map: the host's, its fitted one, or (never calibrated) its nominal one."""
        assert self.host is not None, "the run's start is not known yet"
        if domain == HOST:
            return self.host
        fitted = self._maps.get(domain)
        return fitted if fitted is not None else NominalMap(self.tick_ns.get(domain, 1.0))

    def fitted(self) -> dict[str, FittedMap]:
        """The map of every calibrated domain."""
        return dict(self._maps)

    def ready(self, domain: str) -> bool:
        return self.host is not None and (domain == HOST or domain in self.models)

    @classmethod
    def from_calibration(
        cls,
        topology: Topology,
        t0_host_ns: int,
        calibration: dict[str, NDArray[Any]],
        methods: dict[str, str] | None = None,
        *,
        drift_ppb_per_s: float = 100.0,
    ) -> Domains:
        """The maps of a recorded run: every burst of its ``calibration`` table (columns
        ``domain``, ``burst``, ``t1_ns``, ``t2_ticks``, ``t3_ns``), each fitted with the method
        its ``clock_fit`` rows name (``methods``; hull by default)."""
        out = cls(topology, drift_ppb_per_s=drift_ppb_per_s)
        out.start(t0_host_ns)
        if not len(calibration.get("domain", ())):
            return out
        domains = np.asarray(calibration["domain"]).astype(str)
        bursts = np.asarray(calibration["burst"])
        for domain in sorted(set(domains.tolist()) - {HOST}):
            sel = domains == domain
            for b in sorted(set(bursts[sel].tolist())):
                m = sel & (bursts == b)
                rows = {k: np.asarray(calibration[k])[m] for k in ("t1_ns", "t2_ticks", "t3_ns")}
                out.fit_burst(domain, rows, (methods or {}).get(domain, "hull"))
        return out

    def calibrate(self, domain_index: int, rows: NDArray[Any]) -> str:
        """Fit one burst of domain ``domain_index``; returns the domain's name."""
        domain = self.by_index[domain_index] if 0 <= domain_index < len(self.by_index) else ""
        if not domain or domain == HOST:
            return ""
        self.fit_burst(domain, rows, self.method)
        return domain

    def fit_burst(self, domain: str, rows: Any, method: str) -> Fit:
        """Fit one burst (``t1_ns``, ``t2_ticks``, ``t3_ns``) into ``domain``'s map."""
        ex = Exchanges(
            t1_ns=np.asarray(rows["t1_ns"]).astype(np.int64),
            t2_ticks=np.asarray(rows["t2_ticks"]).astype(np.int64),
            t3_ns=np.asarray(rows["t3_ns"]).astype(np.int64),
        )
        f = fit(ex, method)
        burst = len(self.fits.setdefault(domain, []))
        self.fits[domain].append(f)
        model = ClockModel(
            sorted(self.fits[domain], key=lambda g: g.x0_ticks),
            drift_ppb_per_s=self.drift_ppb_per_s,
            tick_period_ns=self.tick_ns.get(domain, 1.0),
        )
        self.models[domain] = model
        if self.host is not None:
            self._maps[domain] = FittedMap(model, self.host.t0_ticks)
        if self._on_table is not None:
            n = len(ex.t1_ns)
            self._on_table(TableRows(
                "calibration",
                {"domain": [domain] * n, "burst": [burst] * n, "t1_ns": ex.t1_ns,
                 "t2_ticks": ex.t2_ticks, "t3_ns": ex.t3_ns},
            ))  # fmt: skip
            self._on_table(TableRows("clock_fit", fit_row(domain, burst, f)))
        return f

    def bracket_ticks(self, domain: str) -> int | None:
        """How far ``domain``'s map is final: the last tick of its burst before the latest.
        Records up to it lie between bursts with another burst after them, so a step between
        any two is seen (two short bursts alone can always be joined by a line of another rate;
        a third one cannot); past it the map may still change. None before two bursts."""
        fits = self.fits.get(domain)
        if not fits or len(fits) < 2:
            return None
        return sorted(f.x_hi_ticks for f in fits)[-2]

    def to_ns(self, domain: str, ticks: NDArray[np.int64]) -> tuple[NDArray[np.int64], float]:
        """Virtual ns since the run's start, and how far the truth may lie from them (the
        largest distance from an estimate to either of its hard bounds). ``domain`` must be
        ``ready``."""
        assert self.ready(domain), domain
        return self.map(domain).to_ns(ticks)

    def to_ns_each(
        self, domain: str, ticks: NDArray[np.int64]
    ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Virtual ns since the run's start and each one's bound half-width (ns: 0 on the host,
        the reference). A domain never calibrated has only its nominal tick period: its ticks
        are scaled by it, and its bounds are infinite (its offset is unknown)."""
        return self.map(domain).to_ns_each(np.asarray(ticks, dtype=np.int64))

    def scalar_to_ns(self, domain: str, ticks: int) -> int:
        assert self.ready(domain), domain
        return self.map(domain).scalar_to_ns(ticks)


def fit_row(domain: str, burst: int, f: Fit) -> dict[str, Any]:
    """One ``clock_fit`` table row for a burst's fit."""
    return {
        "domain": [domain], "burst": [burst], "method": [f.method], "x0_ticks": [f.x0_ticks],
        "s_ns_per_tick": [f.s_ns_per_tick], "b_ns": [f.b_ns], "feasible": [f.feasible],
        "n": [f.n], "rtt_min_ns": [f.rtt_min_ns], "bound_width_ns": [f.bound_width_ns()],
        "residual_rms_ns": [f.residual_rms_ns],
    }  # fmt: skip
