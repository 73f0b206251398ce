"""Cross-clock latency frames held to an exactly known truth (shared by the clock benchmarks).

In: each item's true insertion and removal time (host ns), the frame grid's zero, the device
tick's length in host ns and the frames a monitor reported for ``latency(...)`` with ``p50``,
``min`` and ``max``. Out: how many frames were checked, how many had a median or an extreme
outside the frame's reported uncertainty of the truth, the worst excess, negative latencies.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from streamscope.aggregate.points import FrameResult, QuantilesPoint, ScalarPoint

#: Times are whole ns and each conversion rounds: two ns of slack on top of the bounds.
SLACK_NS = 2.0


def lower_median(x: np.ndarray) -> float:
    """The median as the monitor defines its quantiles: the smallest value whose cumulative
    count reaches half the count (the inverted distribution function)."""
    return float(np.sort(x)[math.ceil(0.5 * len(x)) - 1])


def check(
    inserted: np.ndarray,
    removed: np.ndarray,
    t0_ns: int,
    frame_ns: int,
    tick_ns: float,
    frames: Sequence[FrameResult],
    removed_latest: np.ndarray | None = None,
) -> tuple[int, int, float, int]:
    """(frames checked, frames where a median or extreme lies outside its uncertainty of the
    truth, the worst excess in ns, negative latencies). ``removed`` is when the device really
    read each removal's tick: the event lies within one tick after it. ``removed_latest``: the
    latest it can have been, where the tick alone cannot say (a reading shortly after a
    backward step repeats positions): the truth is then the interval between the two."""
    late = removed if removed_latest is None else removed_latest
    lat, lat_late = removed - inserted, late - inserted
    frame_of = (removed - t0_ns) // frame_ns
    tick_host = tick_ns * 1.001  # a reading is the tick it lies in
    checked = missed = negative = 0
    worst = 0.0
    for fr in frames:
        sel = frame_of == fr.frame
        stats = {p.stat: p.value for p in fr.points if isinstance(p, ScalarPoint)}
        for p in fr.points:
            if isinstance(p, QuantilesPoint):
                stats.update({f"q{q}": v for q, v in zip(p.qs, p.values, strict=True)})
        for name in ("q0.5", "min", "max"):
            negative += float(stats.get(name) or 0.0) < 0
        if not sel.any() or stats.get("q0.5") is None:
            continue
        reported = float(stats.get("uncertainty_ns") or 0.0)
        unc = reported + tick_host + SLACK_NS
        over = -math.inf
        a, b = lat[sel], lat_late[sel]
        for name, lo, hi in (
            ("q0.5", lower_median(a), lower_median(b)), ("min", a.min(), b.min()),
            ("max", a.max(), b.max()),
        ):  # fmt: skip
            # A frame's median (or extreme) of latencies that each move by at most the
            # uncertainty moves by at most as much; each latency lies in [a, b], so its median
            # (extreme) in [that of a, that of b].
            got = float(stats[name] or 0.0)
            over = max(over, max(float(lo) - got, got - float(hi), 0.0) - unc)
        checked += 1
        if over > 0:
            missed += 1
            worst = max(worst, over)
    return checked, missed, worst, negative


class Tally:
    """Frames checked, missed, the worst excess and negative latencies, per label (``live``,
    ``refitted``/``retimed``), over many trials; ``report`` prints the lines the benchmarks end
    with and says whether every target was met."""

    def __init__(self, *labels: str) -> None:
        self.totals = {label: [0, 0, 0.0, 0] for label in labels}

    def add(self, label: str, result: tuple[int, int, float, int], what: str) -> None:
        checked, missed, worst, negative = result
        t = self.totals[label]
        t[0] += checked
        t[1] += missed
        t[2] = max(float(t[2]), worst)
        t[3] += negative
        if missed or negative:
            print(f"{what} {label}: {missed} of {checked} frames outside, by up to "
                  f"{worst / 1e3:.2f} us; {negative} negative")  # fmt: skip

    def report(self) -> bool:
        met = True
        width = max(len(label) for label in self.totals) + 1
        for label, (checked, missed, worst, negative) in self.totals.items():
            inside = 100.0 * (1 - missed / max(int(checked), 1))
            ok = missed == 0 and negative == 0
            met &= ok
            print(
                f"{label:{width}s} frames {int(checked):5d}  truth inside {inside:6.2f} %  worst "
                f"excess {float(worst) / 1e3:.2f} us  negative {int(negative)}  target 100 %, "
                f"none: {'meets' if ok else 'misses'}"
            )
        return met
