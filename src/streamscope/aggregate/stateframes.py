"""A stage's states reduced where they are recorded: time in each state per frame (a host's agent
reduces its stages' state records so, and ships the frames instead of the records).

In: a stage's state records in its clock's ticks, in order, and where the run's frame grid lies
on that clock (origin and period in ticks, refined as calibration goes on). Out: one
``StateFrame`` per frame once its end has passed (ticks spent in each state, the ticks covered),
and their binary form for a SUMMARY message (``STATE_MAGIC`` tells it from sub-queue summaries).
Time before the stage's first record is idle, as the monitor counts it from records.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from streamscope.core.errors import StreamscopeError
from streamscope.core.records import STATE_LABELS

#: The first bytes of a SUMMARY payload of state frames.
STATE_MAGIC = b"SSSF"
_VERSION = 1
#: magic, version, number of states, probe, number of frames.
_HEAD = struct.Struct("<4sHHqI")
#: Per frame: index, ticks covered, the state at its end, the tick of the latest record (NaN:
#: none yet); then one <f8 per state (+ other).
_FRAME = struct.Struct("<qdqd")
#: States counted apart: the stage's (``STATE_LABELS``) and any other value, last.
N_STATES = len(STATE_LABELS) + 1


class StateFrameError(StreamscopeError):
    """A payload that is not whole state frames."""


@dataclass(frozen=True, slots=True)
class StateFrame:
    """One frame of a stage's states: ``ticks[s]`` spent in state ``s`` (the last entry: any
    other value), over ``covered`` ticks from the frame's start (the whole frame but at the
    run's end); ``end_state`` the state it ended in, ``last_record`` the tick of the stage's
    latest record by then (NaN: none yet) — how long it has been in that state."""

    frame: int
    ticks: tuple[float, ...]
    covered: float
    end_state: int
    last_record: float = math.nan

    def shares(self) -> tuple[float, ...]:
        """The fraction of the covered time in each state."""
        total = sum(self.ticks)
        return tuple(t / total for t in self.ticks) if total > 0 else self.ticks


class StateFrames:
    """One stage's state records → ``StateFrame``s on a frame grid in its ticks."""

    def __init__(self) -> None:
        self._grid: tuple[float, float] | None = None  # origin, period (ticks)
        self._t: list[int] = []
        self._s: list[int] = []
        self._state = 0  # idle until the first record
        self._cursor: float | None = None  # accounted up to here (ticks)
        self._next = 0  # the first frame not closed yet
        self._last = math.nan  # the tick of the latest record accounted

    def set_grid(self, origin_ticks: float, period_ticks: float) -> None:
        """Frame ``k`` spans [origin + k period, origin + (k + 1) period); a later grid moves
        the frames not closed yet."""
        if not (math.isfinite(origin_ticks) and period_ticks > 0):
            raise ValueError(f"a frame grid needs a finite origin and a period > 0, not "
                             f"{origin_ticks}, {period_ticks}")  # fmt: skip
        self._grid = (float(origin_ticks), float(period_ticks))

    def add(self, ticks: ArrayLike, states: ArrayLike) -> None:
        """State records, in order."""
        self._t.extend(np.asarray(ticks, dtype=np.int64).tolist())
        self._s.extend(np.asarray(states, dtype=np.int64).tolist())

    def open_from(self) -> float | None:
        """Where the first frame not closed yet starts (ticks); None without a grid."""
        if self._grid is None:
            return None
        origin, period = self._grid
        return origin + self._next * period

    def close_until(self, watermark_ticks: float) -> list[StateFrame]:
        """Every frame whose end is at or before ``watermark_ticks`` (every record before it
        has been added)."""
        if self._grid is None:
            return []
        origin, period = self._grid
        last = math.floor((watermark_ticks - origin) / period)
        return [self._close(k, origin + k * period, origin + (k + 1) * period)
                for k in range(self._next, last)]  # fmt: skip

    def finish(self, end_ticks: float) -> list[StateFrame]:
        """The run ended at ``end_ticks``: every frame up to it, the last one partial."""
        out = self.close_until(end_ticks)
        open_at = self.open_from()
        if open_at is not None and end_ticks > open_at:
            out.append(self._close(self._next, open_at, end_ticks))
        return out

    def _close(self, k: int, start: float, end: float) -> StateFrame:
        """Frame ``k``, [start, end): the time from where the last one ended (or ``start``)."""
        acc = [0.0] * N_STATES
        cursor = start if self._cursor is None else max(self._cursor, start)
        begin = cursor
        n = 0
        for t, s in zip(self._t, self._s, strict=True):
            if t >= end:
                break
            if t > cursor:
                acc[_slot(self._state)] += t - cursor
                cursor = t
            self._state = s
            self._last = float(t)
            n += 1
        if end > cursor:
            acc[_slot(self._state)] += end - cursor
        del self._t[:n], self._s[:n]
        self._cursor = end
        self._next = k + 1
        return StateFrame(k, tuple(acc), end - begin, self._state, self._last)


def _slot(state: int) -> int:
    return state if 0 <= state < N_STATES - 1 else N_STATES - 1


def encode_state_frames(probe: int, frames: list[StateFrame]) -> bytes:
    """One SUMMARY payload: the state frames of the stage whose state probe is ``probe``."""
    parts = [_HEAD.pack(STATE_MAGIC, _VERSION, N_STATES, probe, len(frames))]
    for f in frames:
        parts.append(_FRAME.pack(f.frame, f.covered, f.end_state, f.last_record))
        parts.append(struct.pack(f"<{N_STATES}d", *f.ticks))
    return b"".join(parts)


def decode_state_frames(payload: bytes) -> tuple[int, list[StateFrame]]:
    """The probe and frames of ``encode_state_frames``'s payload (StateFrameError if it is
    not one)."""
    if len(payload) < _HEAD.size:
        raise StateFrameError(f"state frames: {len(payload)} bytes, less than a header")
    magic, version, n_states, probe, n = _HEAD.unpack_from(payload)
    if magic != STATE_MAGIC or version != _VERSION or n_states != N_STATES:
        raise StateFrameError(
            f"state frames: magic {magic!r} version {version} with {n_states} states; "
            f"expected {STATE_MAGIC!r} version {_VERSION} with {N_STATES}"
        )
    size = _FRAME.size + 8 * N_STATES
    if len(payload) != _HEAD.size + n * size:
        raise StateFrameError(
            f"state frames: {len(payload)} bytes for {n} frames (expected {_HEAD.size + n * size})"
        )
    out = []
    at = _HEAD.size
    for _ in range(n):
        frame, covered, end_state, last = _FRAME.unpack_from(payload, at)
        ticks = struct.unpack_from(f"<{N_STATES}d", payload, at + _FRAME.size)
        out.append(StateFrame(frame, tuple(ticks), covered, end_state, last))
        at += size
    return probe, out
