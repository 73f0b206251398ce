"""One frame of one sub-queue as a value: the reducer's counts, level times, gap histograms and
profiles in; equality by value, a gap histogram ready to sample, and bytes (one or many) out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
from numpy.typing import NDArray

from streamscope.aggregate.subqueue.gaps import GapKind, gap_edges_ns
from streamscope.aggregate.subqueue.wire import read_batch, read_summary, write_batch, write_summary

__all__ = ["SubQueueSummary", "decode_summaries", "encode_summaries"]

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

#: The fields that hold arrays (or None): equal when both are None or equal element-wise.
_ARRAYS = frozenset(("level_ticks", "gap_in", "gap_out", "gap_prod", "profile", "profile_out"))


@dataclass(frozen=True, slots=True, eq=False)
class SubQueueSummary:
    """One frame of one sub-queue, in its own clock's ticks.

    ``level_ticks[i]`` is the ticks spent at level ``i`` within ``[start_ticks, start_ticks +
    covered_ticks)`` (it sums to ``covered_ticks``). The gap histograms count gaps in nominal ns
    (ticks * ``tick_ns``) over the fixed bins of :data:`GAP_EDGES_NS`; ``gap_prod`` is ``None``
    when the producer's states were not tracked.

    ``profile`` (``None`` unless the reducer was asked for one): the insertions in each of its
    ``len(profile)`` equal sub-windows of ``[start_ticks, end_ticks)`` (sub-window ``i`` starts
    at ``start_ticks + (i * span) // len(profile)``); it sums to ``n_in``. ``profile_out``: the
    removals in the same sub-windows (sums to ``n_out``); both or neither. Items whose records
    were refused count where the next kept record of their end lies. (The virtual-queue model
    draws its insertions from ``profile``; ``profile_out`` is summarised beside it for checks
    and estimates that follow the consumer's removals, which the model does not make yet.)
    """

    frame: int
    start_ticks: int
    end_ticks: int
    covered_ticks: int
    n_in: int
    n_out: int
    level_start: int
    level_ticks: I64
    gap_in: I64
    gap_out: I64
    gap_prod: I64 | None
    tick_ns: float
    lossy: bool
    profile: I64 | None = None
    profile_out: I64 | None = None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SubQueueSummary):
            return NotImplemented
        for f in fields(self):
            mine: Any = getattr(self, f.name)
            theirs: Any = getattr(other, f.name)
            if f.name not in _ARRAYS:
                if mine != theirs:
                    return False
            elif (mine is None) != (theirs is None) or not (
                mine is None or np.array_equal(mine, theirs)
            ):
                return False
        return True

    __hash__ = None  # type: ignore[assignment]  # holds arrays: equal by value, not hashable

    def histogram(self, which: GapKind, scale: float = 1.0) -> tuple[F64, F64] | None:
        """``(edges_ns, weights)`` over the non-empty range of bins of one gap histogram, ready
        to sample; ``None`` when it holds no gap (or, for "gap_prod", was not tracked).

        ``which``: "gap_in" (inter-insertion), "gap_out" (back-to-back inter-departure) or
        "gap_prod" (production). ``scale`` multiplies the edges (nominal ns -> corrected ns).
        ``len(edges) == len(weights) + 1``; the first and last weights are positive.
        """
        if which not in ("gap_in", "gap_out", "gap_prod"):
            raise ValueError(f"which must be 'gap_in', 'gap_out' or 'gap_prod', got {which!r}")
        h: I64 | None = getattr(self, which)
        edges = gap_edges_ns(scale)
        if h is None:
            return None
        nz = np.flatnonzero(h)
        if not nz.size:
            return None
        lo, hi = int(nz[0]), int(nz[-1])
        return edges[lo : hi + 2].copy(), h[lo : hi + 1].astype(np.float64)

    def to_bytes(self) -> bytes:
        """Fixed little-endian bytes: a header, ``level_ticks``, then each histogram sparsely
        (:func:`~streamscope.aggregate.subqueue.wire.write_summary`)."""
        return write_summary(self)

    @classmethod
    def from_bytes(cls, b: bytes) -> SubQueueSummary:
        """The summary that :meth:`to_bytes` wrote, or :class:`SummaryFormatError`."""
        return read_summary(cls, b)


def encode_summaries(key: int, summaries: Iterable[SubQueueSummary]) -> bytes:
    """One message body: ``key`` (which sub-queue; the caller decides its meaning) and summaries."""
    return write_batch(key, [s.to_bytes() for s in summaries])


def decode_summaries(b: bytes) -> tuple[int, list[SubQueueSummary]]:
    """``(key, summaries)`` from :func:`encode_summaries`'s bytes, or :class:`SummaryFormatError`."""
    return read_batch(b, SubQueueSummary.from_bytes)
