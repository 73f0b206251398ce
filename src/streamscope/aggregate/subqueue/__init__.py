"""Per-frame reduction of one sub-queue of a virtual queue, where its records are made.

In: the insertion and removal records of one sub-queue (both ends stamped by the same clock, in
raw ticks of nominal period ``tick_ns``), optionally the producer stage's state records, and a
frame grid in those ticks. Out: one small :class:`SubQueueSummary` per frame (time at each level,
counts, fixed-edge histograms of inter-insertion, back-to-back inter-departure and production
gaps and, where asked, the insertions and the removals per equal sub-window of the frame: its
profiles), with a compact binary form, so a device can send summaries instead of records.

``reducer`` holds the on-line reducer, ``fold`` its batch step, ``summary`` the per-frame value,
``wire`` its bytes and ``gaps`` the fixed bins of the gap histograms.
"""

from __future__ import annotations

from streamscope.aggregate.subqueue.gaps import GAP_EDGES_NS, N_GAP_BINS, gap_bins, gap_edges_ns
from streamscope.aggregate.subqueue.reducer import PROFILE_BINS, SubQueueFrames
from streamscope.aggregate.subqueue.summary import (
    SubQueueSummary,
    decode_summaries,
    encode_summaries,
)
from streamscope.aggregate.subqueue.wire import SummaryFormatError

__all__ = [
    "GAP_EDGES_NS",
    "N_GAP_BINS",
    "PROFILE_BINS",
    "SubQueueFrames",
    "SubQueueSummary",
    "SummaryFormatError",
    "decode_summaries",
    "encode_summaries",
    "gap_bins",
    "gap_edges_ns",
]
