"""One clock's ticks to the run's virtual ns, by the grids the runner sends, without a jump.

In: grids (the run's start in the clock's ticks, its ticks per ns), each better than the last,
and the ticks up to which records were placed when each came. Out: virtual ns for ticks, and
ticks for virtual ns (a frame's edges), by one continuous, increasing, piecewise-linear map.

A new grid is not taken at once: records placed by the one before would then lie a jump away
from those placed by it, and every time-weighted figure over a frame that holds the change
(an item put by one grid and taken by the other) would be off by the jump times what the
channel held (a 44 ms jump, one item: 0.09 items over a 500 ms frame). From the last placed
tick the map slews to the new grid over a stretch at least ``SLEW`` times the jump, so that a
duration inside it is off by 1 / SLEW at most; the frames' edges, shipped in ticks, tell the
monitor where they really lie (``monitor.engine``'s grid error).
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

#: The slewing stretch's length per ns of jump: durations inside it are off by 1 % at most.
SLEW = 100.0


class GridMap:
    """Ticks to virtual ns (``ns``) and back (``ticks``) by the grids given to ``set``."""

    def __init__(self) -> None:
        # Pieces: from x[i] ticks (the first from -inf), ns = y[i] + (ticks - x[i]) * k[i].
        self._x = np.empty(0, dtype=np.float64)
        self._y = np.empty(0, dtype=np.float64)
        self._k = np.empty(0, dtype=np.float64)

    @property
    def ready(self) -> bool:
        return len(self._x) > 0

    def set(
        self, origin_ticks: float, ticks_per_ns: float, placed_ticks: float, stretch_ticks: float
    ) -> None:
        """Take the grid ``(origin_ticks, ticks_per_ns)``: ticks up to ``placed_ticks`` (the
        latest placed) keep their ns; from there the map slews to the grid over at least
        ``stretch_ticks`` (and ``SLEW`` times the jump), then follows it."""
        k_new = 1.0 / ticks_per_ns
        if not self.ready:
            self._x = np.array([origin_ticks])
            self._y = np.array([0.0])
            self._k = np.array([k_new])
            return
        placed_ticks = max(placed_ticks, float(self._x[0]))
        y_c = float(self.ns_float(np.array([placed_ticks]))[0])
        jump = (placed_ticks - origin_ticks) * k_new - y_c
        span = max(stretch_ticks, SLEW * abs(jump) * ticks_per_ns, 1.0)
        x_e = placed_ticks + span
        y_e = (x_e - origin_ticks) * k_new
        keep = self._x < placed_ticks
        keep[0] = True  # the first piece reaches back to -inf
        self._x = np.concatenate((self._x[keep], [placed_ticks, x_e]))
        self._y = np.concatenate((self._y[keep], [y_c, y_e]))
        self._k = np.concatenate((self._k[keep], [(y_e - y_c) / span, k_new]))

    def ns_float(self, ticks: NDArray[np.generic]) -> NDArray[np.float64]:
        x = ticks.astype(np.float64)
        i = np.maximum(np.searchsorted(self._x, x, side="right") - 1, 0)
        return self._y[i] + (x - self._x[i]) * self._k[i]

    def ns(self, ticks: NDArray[np.generic]) -> NDArray[np.int64]:
        """Virtual ns (floored) for ``ticks``."""
        return np.floor(self.ns_float(ticks)).astype(np.int64)

    def ticks(self, t_ns: float) -> float:
        """The ticks the map places at ``t_ns`` (its inverse)."""
        i = max(int(np.searchsorted(self._y, t_ns, side="right")) - 1, 0)
        return float(self._x[i] + (t_ns - self._y[i]) / self._k[i])
