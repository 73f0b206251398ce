"""The lines a clock's tangent at an anchor burst may be: one cone per anchor, bounds in one pass.

In: burst fits (a burst's own feasible lines, or those one drifting clock through two neighbouring
bursts allows) and the drift and rate-change allowances. Out: lower and upper host ns of every
cone's lines at many tick positions at once, widened by what the allowances let the clock stray.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.timebase import steps
from streamscope.timebase.burst import Fit

F64 = NDArray[np.float64]


def offsets(x: NDArray[Any], x0: NDArray[np.integer[Any]]) -> F64:
    """x - x0 as float64, exact for integer x (the subtraction happens in int64)."""
    if x.dtype.kind in "iub":
        return (x.astype(np.int64) - x0).astype(np.float64)
    return x.astype(np.float64) - x0.astype(np.float64)


@dataclass(frozen=True, slots=True)
class Cone:
    """Lines a clock's tangent at ``ref`` may be: vertex slopes (ns/tick) and vertex values at
    ``ref`` (ns from ``base``); ``width`` is their slope range."""

    ref: int
    base: float
    vs: F64
    vb: F64

    @property
    def width(self) -> float:
        return float(self.vs.max() - self.vs.min())

    @staticmethod
    def of_fit(f: Fit) -> Cone:
        vs = f.s_ns_per_tick + np.asarray(f.region_ds_ns_per_tick)
        return Cone(f.x0_ticks, f.b_ns, vs, np.asarray(f.region_db_ns))

    @staticmethod
    def of_pair(fa: Fit, fb: Fit, drift_ppb_per_s: float) -> Cone | None:
        j = steps.joint((fa, fb), drift_ppb_per_s)
        if j is None or not j[2].feasible:
            return None
        x_m, b_m, r = j
        return Cone(x_m, b_m, r.vert_s, r.vert_b)


class Cones:
    """One cone per anchor as padded arrays: bounds at many x in one vectorised pass.

    ``rate_change_ppm`` widens cones that two bursts share: a change of rate between them that
    no third burst showed tilts their joint slope by up to that much from the rate on either
    side, so followed outwards it is off by as much per tick (one burst's own slope is measured
    inside the burst, where no such change is taken to happen). Built once with the model and
    never changed."""

    __slots__ = ("base", "kappa", "ref", "tilt", "vb", "vs")

    def __init__(
        self,
        cones: Sequence[Cone],
        drift_ppb_per_s: float,
        rate_change_ppm: float = 0.0,
        shared: Sequence[bool] = (),
    ) -> None:
        self.vs, self.vb = _padded([c.vs for c in cones]), _padded([c.vb for c in cones])
        self.ref = np.array([c.ref for c in cones], dtype=np.int64)
        self.base = np.array([c.base for c in cones], dtype=np.float64)
        s = np.abs(self.vs).max(axis=1) if cones else np.zeros(0)
        self.kappa = drift_ppb_per_s * 1e-18 * s * s
        self.tilt = rate_change_ppm * 1e-6 * s * np.array(shared or [False] * len(cones), bool)

    def bounds(
        self, x: NDArray[Any], i: NDArray[np.intp], tilted: NDArray[np.bool_] | bool = True
    ) -> tuple[F64, F64]:
        """Cone i's lines at x, widened by the drift allowance k*(x - ref)**2/2 and, where
        ``tilted``, the tilt."""
        d = offsets(x, self.ref[i])
        vals = self.vs[i] * d[:, None] + self.vb[i]
        w = 0.5 * self.kappa[i] * d * d + self.tilt[i] * np.abs(d) * tilted
        return self.base[i] + vals.min(axis=1) - w, self.base[i] + vals.max(axis=1) + w

    def at_ref(self, i: NDArray[np.intp]) -> tuple[F64, F64]:
        return self.base[i] + self.vb[i].min(axis=1), self.base[i] + self.vb[i].max(axis=1)


def _padded(rows: list[F64]) -> F64:
    """Rows of vertices as one 2-D array, each padded by repeating its last vertex (min/max over
    a row are unchanged)."""
    width = max((r.size for r in rows), default=1)
    return np.array([[*r.tolist(), *[r[-1]] * (width - r.size)] for r in rows], dtype=np.float64)


def anchor_cones(
    anchors: Sequence[Fit], segment: NDArray[np.int64], drift_ppb_per_s: float
) -> tuple[list[Cone], list[Cone], list[Cone]]:
    """Per anchor: its own cone, and the cone it shares with its segment neighbour before
    (bounds after the anchor) and after (bounds before it), its own where it has none."""
    own = [Cone.of_fit(f) for f in anchors]
    fwd, bwd = list(own), list(own)
    for k in range(1, len(anchors)):  # per burst, not per event
        if segment[k - 1] == segment[k]:
            pair = Cone.of_pair(anchors[k - 1], anchors[k], drift_ppb_per_s)
            if pair is not None:
                fwd[k] = pair
                bwd[k - 1] = pair
    return own, fwd, bwd
