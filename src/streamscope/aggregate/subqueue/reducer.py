"""The on-line reducer of one sub-queue: chunks of its insertion, removal and producer-state
records (raw ticks) and a frame grid in; per-frame :class:`SubQueueSummary` values out, as
watermarks close frames.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
from numpy.typing import ArrayLike, NDArray

from streamscope.aggregate.subqueue.fold import Carry, Records, fold
from streamscope.aggregate.subqueue.pending import PendingRecords
from streamscope.aggregate.subqueue.summary import SubQueueSummary
from streamscope.aggregate.subqueue.wire import MAX_PROFILE_BINS

__all__ = ["MAX_FRAMES_PER_CALL", "PROFILE_BINS", "FrameEdges", "SubQueueFrames"]

I64 = NDArray[np.int64]

#: Sub-windows of the insertion profile that virtual queues ask for (1/128 of a 1 s frame is
#: ~8 ms, a few service times of the micro-benchmarks; of a 200 ms frame, ~1.6 ms).
PROFILE_BINS = 128

#: The most frames one call may close (a runaway watermark must not build an endless list).
MAX_FRAMES_PER_CALL = 1_000_000


class FrameEdges:
    """A frame grid in one clock's ticks, refined as the clock's fit improves: frame ``k >= 0``
    covers ``[round(origin + k*period), round(origin + (k+1)*period))``; after a refinement the
    frames already closed keep their edges (``pin``: the first open frame starts where the
    last closed one ended)."""

    def __init__(self) -> None:
        self.origin: float | None = None
        self.period = 0.0
        self._pin: tuple[int, int] | None = None  # (frame, start tick) kept across a re-grid

    def set(self, origin_ticks: float, period_ticks: float, next_frame: int) -> None:
        """A grid (again): ``next_frame`` is the first frame not closed yet."""
        if not (math.isfinite(origin_ticks) and math.isfinite(period_ticks)):
            raise ValueError("grid origin and period must be finite")
        if period_ticks < 1.0:
            raise ValueError(f"period_ticks must be at least 1 tick, got {period_ticks}")
        if self.origin is not None:
            self._pin = (next_frame, self.bound(next_frame))
        self.origin = float(origin_ticks)
        self.period = float(period_ticks)
        if self._pin is not None and self._raw_bound(self._pin[0] + 1) <= self._pin[1]:
            raise ValueError("a refined grid may not end the next frame before it starts")

    def _raw_bound(self, k: int) -> int:
        assert self.origin is not None
        return math.floor(self.origin + k * self.period + 0.5)

    def bound(self, k: int) -> int:
        """The first tick of frame ``k``."""
        if self._pin is not None and k == self._pin[0]:
            return self._pin[1]
        return self._raw_bound(k)

    def bounds(self, k0: int, k1: int) -> I64:
        """Boundaries of frames ``k0..k1-1``: ``k1 - k0 + 1`` ticks."""
        assert self.origin is not None
        k = np.arange(k0, k1 + 1, dtype=np.float64)
        out: I64 = np.floor(self.origin + k * self.period + 0.5).astype(np.int64)
        if self._pin is not None and k0 <= self._pin[0] <= k1:
            out[self._pin[0] - k0] = self._pin[1]
        return out

    def closable(self, watermark: int) -> int:
        """The number ``j`` of grid boundaries ``b(0..j-1)`` at or before ``watermark``."""
        assert self.origin is not None
        j = math.floor((watermark - self.origin) / self.period) + 1
        j = max(j, 0)
        while j > 0 and self.bound(j - 1) > watermark:
            j -= 1
        while self.bound(j) <= watermark:
            j += 1
        return j


class SubQueueFrames:
    """Streaming per-frame reducer of one sub-queue (both of its ends in this clock).

    Feed time-ordered chunks with :meth:`add_insertions`, :meth:`add_removals` and (optionally)
    :meth:`add_states` in any interleaving, then :meth:`close_until` a watermark: every record
    with ticks below it must have been added by then. Frames are only closed once a grid is set
    (:meth:`set_grid`); records before the grid's origin belong to no frame but still move the
    level. The values of insertion and removal records are the 1-based item sequence numbers at
    that end; the level is ``last insertion seq - last removal seq`` (FIFO, at least 0), exact at
    every kept record even when records were refused. A frame holding a record whose sequence
    number jumped is flagged ``lossy``; the missing items count in that frame's ``n_in`` /
    ``n_out``, and gaps next to a jump are not counted. Memory holds the records not
    yet closed and the insertion times of the items still in the sub-queue.

    With ``states=True`` (or once :meth:`add_states` has been called) summaries carry production
    gaps: each inter-insertion gap less the producer's time in BLOCKED_OUT between the two
    insertions. With ``profile=K`` (``1..MAX_PROFILE_BINS``; 0: none) they carry the insertions
    and the removals in each of ``K`` equal sub-windows of the frame (see
    :class:`SubQueueSummary`).
    """

    def __init__(self, tick_ns: float = 1.0, *, states: bool = False, profile: int = 0) -> None:
        if not (math.isfinite(tick_ns) and tick_ns > 0.0):
            raise ValueError(f"tick_ns must be a finite positive number, got {tick_ns}")
        if int(profile) != profile or not 0 <= profile <= MAX_PROFILE_BINS:
            raise ValueError(f"profile must be an integer in 0..{MAX_PROFILE_BINS}, got {profile}")
        self.tick_ns = float(tick_ns)
        self._profile = int(profile)
        self._with_states = bool(states)
        self._edges = FrameEdges()
        self._next = 0  # the next frame to close
        self._cursor: int | None = None  # records below this are folded (start of frame _next)
        self._finished = False
        self._ins = PendingRecords("insertions")
        self._rem = PendingRecords("removals")
        self._st = PendingRecords("states")
        self._carry = Carry()
        # The latest sequence numbers each end refused: what no kept record accounts for at the
        # end of the run is still counted, in the last frame.
        self._top_in = 0
        self._top_out = 0

    # -- input ------------------------------------------------------------------------------

    @property
    def grid(self) -> tuple[float, float] | None:
        """``(origin_ticks, period_ticks)`` once set."""
        e = self._edges
        return None if e.origin is None else (e.origin, e.period)

    @property
    def pending(self) -> int:
        """Records added and not yet folded into closed frames."""
        return len(self._ins) + len(self._rem) + len(self._st)

    @property
    def in_queue(self) -> int:
        """Items whose insertion times are held (inserted, not yet removed, as folded so far)."""
        return int(self._carry.live_seq.size)

    def set_grid(self, origin_ticks: float, period_ticks: float) -> None:
        """Frame ``k >= 0`` covers ``[round(origin + k*period), round(origin + (k+1)*period))``.

        May be called again with a refined grid (a better clock fit): frames already closed keep
        their edges, the next one starts where the last closed one ended and ends on the new
        grid, and every later one lies on the new grid.
        """
        self._edges.set(origin_ticks, period_ticks, self._next)

    def add_insertions(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._check_open()
        self._ins.add(ticks, seq)

    def add_removals(self, ticks: ArrayLike, seq: ArrayLike) -> None:
        self._check_open()
        self._rem.add(ticks, seq)

    def know_insertions(self, seq: int) -> None:
        """Insertion ``seq`` happened (its record was refused)."""
        self._top_in = max(self._top_in, int(seq))

    def know_removals(self, seq: int) -> None:
        """Removal ``seq`` happened (its record was refused)."""
        self._top_out = max(self._top_out, int(seq))

    def add_states(self, ticks: ArrayLike, states: ArrayLike) -> None:
        """The producer stage's state records (value = new :class:`State`)."""
        self._check_open()
        self._with_states = True
        self._st.add(ticks, states)

    def _check_open(self) -> None:
        if self._finished:
            raise RuntimeError("this reducer has finished")

    @staticmethod
    def _check_count(n: int) -> None:
        if n > MAX_FRAMES_PER_CALL:
            raise ValueError(
                f"{n} frames to close in one call (at most {MAX_FRAMES_PER_CALL}); "
                "is the watermark an end marker? use finish()"
            )

    # -- closing frames ---------------------------------------------------------------------

    def close_until(self, watermark_ticks: int) -> list[SubQueueSummary]:
        """Every frame ending at or before ``watermark_ticks`` not closed yet, in order."""
        self._check_open()
        if self._edges.origin is None:
            return []
        k1 = (
            self._edges.closable(int(watermark_ticks)) - 1
        )  # frames _next..k1-1 end by the watermark
        if k1 <= self._next:
            return []
        self._check_count(k1 - self._next)
        bnd = self._edges.bounds(self._next, k1)
        return self._fold(bnd, bnd)

    def finish(self, end_ticks: int) -> list[SubQueueSummary]:
        """Close everything up to ``end_ticks`` (the last frame partial); records at or after it
        are dropped. No frames without a grid."""
        self._check_open()
        self._finished = True
        out: list[SubQueueSummary] = []
        if self._edges.origin is not None:
            end = int(end_ticks)
            self._account_refused(end)
            j = self._edges.closable(end)  # b(j-1) <= end < b(j)
            if j - 1 >= self._next and end >= self._edges.bound(self._next):
                k1 = j - 1 if end == self._edges.bound(j - 1) else j  # frames _next..k1-1
                if k1 > self._next:
                    self._check_count(k1 - self._next)
                    grid = self._edges.bounds(self._next, k1)
                    seg = grid.copy()
                    seg[-1] = min(int(grid[-1]), end)
                    out = self._fold(seg, grid)
        for p in (self._ins, self._rem, self._st):
            p.clear()
        live = self._carry.live_seq, self._carry.live_t
        self._carry = replace(self._carry, live_seq=live[0][:0], live_t=live[1][:0])
        return out

    def _account_refused(self, end: int) -> None:
        """Items refused after each end's last kept record: one record that accounts for them
        all, just before the end (its frame is lossy; no gap next to it counts)."""
        for pend, top, last in (
            (self._ins, self._top_in, self._carry.ins_seq),
            (self._rem, self._top_out, self._carry.rem_seq),
        ):
            if top > max(last, pend.top(end)):
                # No cursor yet: nothing bounds it from below (the grid may start before 0).
                at = end - 1 if self._cursor is None else max(end - 1, self._cursor)
                pend.add(np.array([at], np.int64), np.array([top], np.int64))

    def _fold(self, seg: I64, grid: I64) -> list[SubQueueSummary]:
        """Fold every record below ``seg[-1]`` into frames ``_next ..``; frame ``j`` covers
        ``[seg[j], seg[j+1])`` of grid frame ``[grid[j], grid[j+1])``."""
        limit = int(seg[-1])
        rec = Records(
            *self._ins.pop_before(limit), *self._rem.pop_before(limit), *self._st.pop_before(limit)
        )
        if self._cursor is not None:
            # Records below the cursor broke the watermark contract: count them in this frame.
            c = self._cursor
            rec = rec._replace(
                ins_t=np.maximum(rec.ins_t, c),
                rem_t=np.maximum(rec.rem_t, c),
                st_t=np.maximum(rec.st_t, c),
            )
        out, self._carry = fold(
            rec, self._carry, seg, grid, self._next,
            tick_ns=self.tick_ns, profile=self._profile, states=self._with_states,
        )  # fmt: skip
        self._next += seg.size - 1
        self._cursor = limit
        return out
