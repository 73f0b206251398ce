"""An emulated device clock with a known rate error, offset, drift, tick and step.

In: a spec (text or random) and the host epoch. Out: device tick readings, and for validation only
the truth (host ns at any tick position) and how far a fit's bounds sit from it.
"""

from __future__ import annotations

import itertools
import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.core.errors import ConfigError

if TYPE_CHECKING:
    from streamscope.timebase.calibration import Fit

_monotonic_ns = time.monotonic_ns  # bound once: now_ticks runs on device processes' hot paths
_floor = math.floor

__all__ = ["EmulatedClock", "EmulatedClockSpec", "TruthCheck", "check_truth"]

_VALID_KEYS = (
    "rate_ppm", "offset_s", "drift_ppb_s", "tick_ns", "step_at_s", "step_ns", "rate_step_at_s",
    "rate_step_ppm",
)  # fmt: skip
_OPTIONAL = ("step_at_s", "rate_step_at_s")  # a time, or none
_VALID = ", ".join(_VALID_KEYS)
_DEFAULTS: dict[str, float | None] = {
    "rate_ppm": 0.0,
    "offset_s": 0.0,
    "drift_ppb_s": 0.0,
    "tick_ns": 1.0,
    "step_at_s": None,
    "step_ns": 0.0,
    "rate_step_at_s": None,
    "rate_step_ppm": 0.0,
}


#: In a validation run's truth folder: each emulated clock's spec and epoch, by resource.
CLOCK_TRUTH = "clocks.json"


@dataclass(frozen=True, slots=True)
class EmulatedClockSpec:
    """How an emulated device clock departs from the host's: d(τ) = offset + τ(1 + rate) + ½drift·τ².

    ``rate_ppm``: frequency error (parts per million); ``offset_s``: device time at the epoch;
    ``drift_ppb_s``: change of the rate per second of host time (ppb/s); ``tick_ns``: the counter's
    period (nominal: the device believes its counter runs at exactly this); ``step_at_s``: host
    seconds after the epoch at which device time jumps by ``step_ns`` (forward, or backward
    when negative: a clock set back; None: never); ``rate_step_at_s``: host seconds after the
    epoch at which the rate changes by ``rate_step_ppm`` (None: never).
    """

    rate_ppm: float = 0.0
    offset_s: float = 0.0
    drift_ppb_s: float = 0.0
    tick_ns: float = 1.0
    step_at_s: float | None = None
    step_ns: float = 0.0
    rate_step_at_s: float | None = None
    rate_step_ppm: float = 0.0

    def __post_init__(self) -> None:
        problem = _problem({key: getattr(self, key) for key in _VALID_KEYS})
        if problem:
            raise ConfigError(f"emulated clock: {problem}; valid keys: {_VALID}")

    @classmethod
    def parse(cls, text: str) -> EmulatedClockSpec:
        """``"rate_ppm=37,offset_s=12.5,drift_ppb_s=1,tick_ns=7.5"``; missing keys take defaults.

        ``step_at_s=none`` means no step. Raises ConfigError naming the bad key and the valid ones.
        """
        values: dict[str, float | None] = {}
        where = f"emulated clock spec {text!r}"
        for raw in text.split(","):
            item = raw.strip()
            if not item:
                continue
            key, eq, value = (s.strip() for s in item.partition("="))
            problem = ""
            if key not in _VALID_KEYS:
                problem = f"unknown key {key!r}"
            elif not eq or not value:
                problem = f"{key} needs a value ({key}=NUMBER)"
            elif key in values:
                problem = f"{key} is given twice"
            elif key in _OPTIONAL and value.lower() == "none":
                values[key] = None
                continue
            else:
                try:
                    values[key] = float(value)
                except ValueError:
                    problem = f"{key}={value!r} is not a number"
            if problem:
                raise ConfigError(f"{where}: {problem}; valid keys: {_VALID}")
        problem = _problem({**_DEFAULTS, **values})
        if problem:
            raise ConfigError(f"{where}: {problem}; valid keys: {_VALID}")
        return cls(**values)  # type: ignore[arg-type]

    def __str__(self) -> str:
        parts = [
            f"rate_ppm={self.rate_ppm!r}",
            f"offset_s={self.offset_s!r}",
            f"drift_ppb_s={self.drift_ppb_s!r}",
            f"tick_ns={self.tick_ns!r}",
        ]
        if self.step_at_s is not None or self.step_ns:
            parts.append(f"step_at_s={'none' if self.step_at_s is None else repr(self.step_at_s)}")
            parts.append(f"step_ns={self.step_ns!r}")
        if self.rate_step_at_s is not None or self.rate_step_ppm:
            at = "none" if self.rate_step_at_s is None else repr(self.rate_step_at_s)
            parts.append(f"rate_step_at_s={at}")
            parts.append(f"rate_step_ppm={self.rate_step_ppm!r}")
        return ",".join(parts)

    @classmethod
    def random(cls, rng: np.random.Generator) -> EmulatedClockSpec:
        """A spec for randomised trials: rate ±100 ppm, offset ±1000 s, drift ±10 ppb/s, tick
        1 ns – 2 µs (log-uniform), and one time in four a forward step of up to 1 ms."""
        step_at_s: float | None = None
        step_ns = 0.0
        if rng.random() < 0.25:
            step_at_s = float(rng.uniform(0.0, 10.0))
            step_ns = float(rng.uniform(0.0, 1e6))
        return cls(
            rate_ppm=float(rng.uniform(-100.0, 100.0)),
            offset_s=float(rng.uniform(-1000.0, 1000.0)),
            drift_ppb_s=float(rng.uniform(-10.0, 10.0)),
            tick_ns=float(np.exp(rng.uniform(0.0, math.log(2000.0)))),
            step_at_s=step_at_s,
            step_ns=step_ns,
        )


def _problem(values: dict[str, float | None]) -> str:
    """What is wrong with a spec's values (naming the key), or ""."""
    for key, value in values.items():
        if value is None and key in _OPTIONAL:
            continue
        if not isinstance(value, (int, float)) or not math.isfinite(value):
            return f"{key} must be a finite number, got {value!r}"
    # None was refused above for every key but the optional times, so `or 0.0` only satisfies
    # the types.
    tick, rate, rate_step = (
        float(values[k] or 0.0) for k in ("tick_ns", "rate_ppm", "rate_step_ppm")
    )
    if tick <= 0:
        return f"tick_ns must be > 0, got {tick!r}"
    if rate <= -1e6:
        return f"rate_ppm must be > -1000000 (the clock runs forwards), got {rate!r}"
    if rate + rate_step <= -1e6:
        return f"rate_ppm + rate_step_ppm must be > -1000000 (the clock runs forwards), got {rate + rate_step!r}"
    return ""


class EmulatedClock:
    """A device counter driven by the host's monotonic clock through an ``EmulatedClockSpec``.

    Device ns: d(τ) = c0 + c1·τ + c2·τ² (+ step_ns once τ ≥ step_at), τ = host ns − epoch;
    ticks = floor(d / tick_ns). The truth methods are for validation: calibration never sees them.
    """

    __slots__ = (
        "_c0",
        "_c1",
        "_c2",
        "_epoch",
        "_rate_at",
        "_rate_step",
        "_step",
        "_step_at",
        "domain",
        "spec",
        "tick_period_ns",
    )

    def __init__(
        self, spec: EmulatedClockSpec, epoch_host_ns: int, *, domain: str = "emulated"
    ) -> None:
        self.spec = spec
        self.domain = domain
        self.tick_period_ns = spec.tick_ns
        self._epoch = int(epoch_host_ns)
        self._c0 = spec.offset_s * 1e9
        self._c1 = 1.0 + spec.rate_ppm * 1e-6
        self._c2 = 0.5 * spec.drift_ppb_s * 1e-18  # ppb/s → 1/ns, halved by the integral
        self._step_at = math.inf if spec.step_at_s is None else spec.step_at_s * 1e9
        self._step = spec.step_ns
        self._rate_at = math.inf if spec.rate_step_at_s is None else spec.rate_step_at_s * 1e9
        self._rate_step = spec.rate_step_ppm * 1e-6

    @property
    def epoch_host_ns(self) -> int:
        return self._epoch

    def now_ticks(self) -> int:
        """The counter now: one host clock read and a few float operations (~200 ns over the read)."""
        # int − int stays exact at any uptime; `* 1.0` converts to float once, not in every product.
        tau = (_monotonic_ns() - self._epoch) * 1.0
        d = self._c0 + tau * (self._c1 + tau * self._c2)
        if tau >= self._step_at:
            d += self._step
        if tau >= self._rate_at:
            d += (tau - self._rate_at) * self._rate_step
        return _floor(d / self.tick_period_ns)

    def native_clock(self, impl: Any = None) -> Any:
        """The same clock as a probe-core ``Clock`` (``core.native``, or the implementation
        module ``impl``): what a device process's rings read, computed from these parameters."""
        from streamscope.core import native

        mod = impl if impl is not None else native
        return mod.Clock(
            "emulated", epoch_ns=self._epoch, c0=self._c0, c1=self._c1, c2=self._c2,
            step_at=self._step_at, step=self._step, tick_ns=self.tick_period_ns,
            rate_at=self._rate_at, rate_step=self._rate_step,
        )  # fmt: skip

    def ticks_at(self, host_ns: ArrayLike) -> NDArray[np.int64]:
        """The counter reading at integer host times: exactly what ``now_ticks`` returns then."""
        tau = (np.asarray(host_ns, dtype=np.int64) - np.int64(self._epoch)).astype(np.float64)
        d = self._c0 + tau * (self._c1 + tau * self._c2)
        d = np.where(tau >= self._step_at, d + self._step, d)
        if math.isfinite(self._rate_at):
            d = np.where(tau >= self._rate_at, d + (tau - self._rate_at) * self._rate_step, d)
        return np.floor(d / self.tick_period_ns).astype(np.int64)

    def _tau_for(
        self, d_ns: NDArray[np.float64], c0: float, c1: float | None = None
    ) -> NDArray[np.float64]:
        # The root of c2·τ² + c1·τ + (c0 − d) = 0 near (d − c0)/c1, in the form that stays exact
        # as c2 → 0 (no cancellation between c1 and the square root).
        c1 = self._c1 if c1 is None else c1
        u = d_ns - c0
        disc = np.sqrt(np.maximum(c1 * c1 + 4.0 * self._c2 * u, 0.0))
        return 2.0 * u / (c1 + disc)

    def _pieces(self) -> list[tuple[float, float, float, float]]:
        """The map's smooth pieces in host time: (τ from, τ to, c0, c1) with d = c0 + c1·τ +
        c2·τ² on each (the step and the change of rate folded into c0 and c1)."""
        events = sorted(t for t in (self._step_at, self._rate_at) if math.isfinite(t))
        edges = [-math.inf, *events, math.inf]
        out = []
        for lo, hi in itertools.pairwise(edges):
            c0, c1 = self._c0, self._c1
            if lo >= self._step_at:
                c0 += self._step
            if lo >= self._rate_at:
                c0 -= self._rate_at * self._rate_step
                c1 += self._rate_step
            out.append((lo, hi, c0, c1))
        return out

    def true_host_ns(self, x_ticks: ArrayLike) -> NDArray[np.float64]:
        """Host ns at which the device was at tick position ``x_ticks`` (continuous; a reading k
        means the position was in [k, k+1)). Exact to float rounding. Positions skipped by a
        forward step map to the step's host time; positions a backward step repeats, to the
        first time the device was there."""
        d = np.asarray(x_ticks, dtype=np.float64) * self.tick_period_ns
        tau = np.full(d.shape, np.nan)
        for lo, hi, c0, c1 in self._pieces():
            cand = self._tau_for(d, c0, c1)
            fits = np.isnan(tau) & (cand >= lo) & (cand < hi)
            tau = np.where(fits, cand, tau)
        # Not reached by any piece: skipped by a forward step, at the step.
        tau = np.where(np.isnan(tau), self._step_at, tau)
        return tau + float(self._epoch)

    def true_host_ns_latest(self, x_ticks: ArrayLike) -> NDArray[np.float64]:
        """As ``true_host_ns``, but a position a backward step repeats maps to the last time the
        device came to [x, x + 1) (with ``true_host_ns_in_order``: the interval a reading lies
        in); a step back into the middle of a tick comes to it at the step."""
        d = np.asarray(x_ticks, dtype=np.float64).ravel() * self.tick_period_ns
        tau = np.full(d.shape, -np.inf)
        for lo, hi, c0, c1 in self._pieces():
            cand = self._tau_for(d, c0, c1)
            # This piece was inside [x, x + 1) for a while: from where it entered it, or from
            # the piece's start, where a backward step put it in the middle of the tick. A
            # piece that starts at a change of rate goes on from the one before: a tick it
            # starts inside was entered there, not again.
            jumped = lo == self._step_at and self._step < 0
            leaves = self._tau_for(d + self.tick_period_ns, c0, c1)
            visited = (cand < hi) & (leaves > lo) & ((cand >= lo) | jumped)
            tau = np.where(visited, np.maximum(tau, np.maximum(cand, lo)), tau)
        tau = np.where(np.isfinite(tau), tau, self._step_at)  # skipped by a forward step
        return tau + float(self._epoch)

    def true_host_ns_in_order(self, x_ticks: ArrayLike) -> NDArray[np.float64]:
        """As ``true_host_ns`` for readings taken one after another (in host time): a position
        a backward step repeats maps to the first time at or after the previous reading's.
        That is the earliest the reading can have been taken (a reading shortly after a
        backward step may as well be the later visit: ``true_host_ns_latest``)."""
        d = np.asarray(x_ticks, dtype=np.float64).ravel() * self.tick_period_ns
        pieces = self._pieces()
        cands = np.full((len(d), len(pieces)), np.nan)
        for j, (lo, hi, c0, c1) in enumerate(pieces):
            cand = self._tau_for(d, c0, c1)
            cands[:, j] = np.where((cand >= lo) & (cand < hi), cand, np.nan)
        out = np.empty(len(d))
        last = -math.inf
        for i, row in enumerate(cands):
            ok = row[row >= last]
            # Not reached by any piece (skipped by a forward step): at the step.
            last = float(ok.min()) if len(ok) else max(last, self._step_at)
            out[i] = last
        return out + float(self._epoch)

    def true_s_ns_per_tick(self, x_ticks: ArrayLike) -> NDArray[np.float64]:
        """The true local slope dt_host/dx (host ns per device tick) at tick position ``x_ticks``."""
        tau = self.true_host_ns(x_ticks) - float(self._epoch)
        rate = np.where(tau >= self._rate_at, self._rate_step, 0.0)
        return self.tick_period_ns / (self._c1 + rate + 2.0 * self._c2 * tau)


@dataclass(frozen=True, slots=True)
class TruthCheck:
    """A fit compared with the emulated truth over a span of tick positions (all ns are host ns).

    ``margin_ns`` is the smallest distance from the truth to the nearer hard bound over the checked
    positions: negative means the truth fell outside. ``x_centre`` is the fit's x0_ticks, where
    ``true_b_ns`` (true host ns) and ``offset_error_ns`` (estimate − truth) are taken.
    """

    x_centre: int
    true_s_ns_per_tick: float
    true_b_ns: float
    offset_error_ns: float
    margin_ns: float
    n_checked: int

    @property
    def inside(self) -> bool:
        return self.margin_ns >= 0.0

    def to_dict(self) -> dict[str, float | int | bool]:
        return {
            "x_centre": self.x_centre,
            "true_s_ns_per_tick": self.true_s_ns_per_tick,
            "true_b_ns": self.true_b_ns,
            "offset_error_ns": self.offset_error_ns,
            "truth_margin_ns": self.margin_ns,
            "truth_inside_bounds": self.inside,
            "n_checked": self.n_checked,
        }


def check_truth(fit: Fit, clock: EmulatedClock, *, n_points: int = 1001) -> TruthCheck:
    """Compare ``fit`` with ``clock``'s truth at ``n_points`` positions across the burst's span
    [x_lo_ticks, x_hi_ticks]; offsets and the true map are taken at the fit's centre x0_ticks."""
    x = np.linspace(float(fit.x_lo_ticks), float(fit.x_hi_ticks), n_points)
    truth = clock.true_host_ns(x)
    lo, hi = fit.bounds(x)
    margin = float(np.min(np.minimum(truth - lo, hi - truth)))
    true_b = float(clock.true_host_ns(fit.x0_ticks))
    return TruthCheck(
        x_centre=fit.x0_ticks,
        true_s_ns_per_tick=float(clock.true_s_ns_per_tick(fit.x0_ticks)),
        true_b_ns=true_b,
        offset_error_ns=fit.b_ns - true_b,
        margin_ns=margin,
        n_checked=n_points,
    )
