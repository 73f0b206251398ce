"""Frame arithmetic on integer nanoseconds relative to a run's start: times and half-open
intervals (int64 arrays) flow in; frame indices, frame bounds and per-frame pieces flow out.
Frame ``f`` covers ``[f * frame_ns, (f + 1) * frame_ns)``.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["frame_bounds", "frame_index", "split_at_frames"]

I64 = NDArray[np.int64]


def _check_frame_ns(frame_ns: int) -> None:
    if int(frame_ns) <= 0:
        raise ValueError(f"frame_ns must be a positive number of nanoseconds, got {frame_ns}")


def _as_int64(name: str, a: ArrayLike) -> I64:
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise TypeError(f"{name} must hold integer nanoseconds, got dtype {arr.dtype}")
    return arr.astype(np.int64, copy=False)


def frame_index(t_ns: I64, frame_ns: int) -> I64:
    """Frame of each time: ``floor(t_ns / frame_ns)`` (negative times give negative frames)."""
    _check_frame_ns(frame_ns)
    return np.floor_divide(_as_int64("t_ns", t_ns), np.int64(frame_ns))


def runs(keys: I64) -> tuple[I64, I64]:
    """``(values, starts)`` of the runs of equal values in ``keys`` (e.g. non-decreasing frames):
    what ``np.unique(keys, return_index=True)`` gives for sorted keys, in one pass."""
    if not len(keys):
        return keys[:0], np.zeros(0, dtype=np.int64)
    starts = np.concatenate(([0], np.flatnonzero(keys[1:] != keys[:-1]) + 1)).astype(np.int64)
    return keys[starts], starts


def frame_bounds(frame: int, frame_ns: int) -> tuple[int, int]:
    """``(t_start_ns, t_end_ns)`` of ``frame``, half-open."""
    _check_frame_ns(frame_ns)
    return int(frame) * int(frame_ns), (int(frame) + 1) * int(frame_ns)


def split_at_frames(start_ns: I64, end_ns: I64, frame_ns: int) -> tuple[I64, I64, I64]:
    """Split half-open intervals ``[start_ns[i], end_ns[i])`` at multiples of ``frame_ns``.

    Returns ``(seg, frame, dur_ns)``, one entry per non-empty piece, in interval order and then
    frame order: the index of the interval the piece came from, its frame, and its length in ns.
    The pieces of interval ``i`` lie in consecutive frames and their lengths sum to
    ``end_ns[i] - start_ns[i]``; empty intervals give no pieces.
    """
    _check_frame_ns(frame_ns)
    start = _as_int64("start_ns", start_ns).reshape(-1)
    end = _as_int64("end_ns", end_ns).reshape(-1)
    if start.shape != end.shape:
        raise ValueError(f"start_ns has {start.size} entries but end_ns has {end.size}")
    if bool(np.any(end < start)):
        raise ValueError("every interval needs start_ns <= end_ns")
    f = np.int64(frame_ns)
    nonempty = end > start
    first = np.floor_divide(start, f)
    # end is exclusive, so the last nanosecond covered is end - 1
    last = np.floor_divide(np.where(nonempty, end - 1, start), f)
    if bool(np.all(first == last)):
        # The common case: no interval crosses a frame boundary, so nothing is split.
        seg = np.flatnonzero(nonempty).astype(np.int64)
        return seg, first[seg], end[seg] - start[seg]
    n_pieces = np.where(nonempty, last - first + 1, 0)
    seg = np.repeat(np.arange(start.size, dtype=np.int64), n_pieces)
    offset = np.arange(seg.size, dtype=np.int64) - np.repeat(
        np.cumsum(n_pieces) - n_pieces, n_pieces
    )
    frame = first[seg] + offset
    lo = np.maximum(start[seg], frame * f)
    hi = np.minimum(end[seg], (frame + 1) * f)
    return seg, frame, hi - lo
