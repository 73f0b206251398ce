"""The numbers a finding gives as its evidence: rounded figures and the frames they come from.

In: whole-run figures, and a run's ``Series`` with the stages or channel a finding is about. Out:
rounded numbers (``rounded``), frame numbers that show a state (``busy_frames``,
``level_frames``) and compact ``[first, last]`` frame ranges (``frame_ranges``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from streamscope.analysis.levels import full_empty_per_frame
from streamscope.analysis.series import Series


def frame_ranges(frames: Iterable[int]) -> list[list[int]]:
    """Frame numbers as ``[first, last]`` runs: ``{0, 1, 2, 5}`` → ``[[0, 2], [5, 5]]``."""
    out: list[list[int]] = []
    for f in sorted(set(frames)):
        if out and f == out[-1][1] + 1:
            out[-1][1] = f
        else:
            out.append([f, f])
    return out


def rounded(x: float | None, digits: int = 4) -> float | None:
    """``x`` to ``digits`` decimals; ``None`` for ``None`` or ``NaN``."""
    return None if x is None or math.isnan(x) else round(float(x), digits)


def busy_frames(series: Sequence[Series], stages: Sequence[str], threshold: float) -> list[int]:
    """Frames in which the mean busy fraction of ``stages`` (those with a figure) >= threshold."""
    per: dict[int, list[float]] = {}
    for s in series:
        if s.query.metric != "state" or s.target not in stages or s.duty is None:
            continue
        if "busy" not in s.duty_labels:
            continue
        busy = s.duty[:, s.duty_labels.index("busy")]
        # One value per frame of one query: a handful, not a per-event loop.
        for f, b in zip(s.frames.tolist(), busy.tolist(), strict=True):
            if not math.isnan(b):
                per.setdefault(int(f), []).append(float(b))
    return sorted(f for f, bs in per.items() if sum(bs) / len(bs) >= threshold)


def level_frames(
    series: Sequence[Series], channel: str, capacity: int, which: str, mostly: float
) -> list[int]:
    """Frames in which ``channel`` was full (``which='full'``) or empty at least ``mostly``."""
    out: set[int] = set()
    for s in series:
        if s.query.metric != "occupancy" or s.target != channel:
            continue
        total, empty, full = full_empty_per_frame(s, capacity)
        part = full if which == "full" else empty
        with np.errstate(invalid="ignore", divide="ignore"):
            frac = part / total
        out.update(int(f) for f in s.frames[np.nan_to_num(frac) >= mostly])
    return sorted(out)
