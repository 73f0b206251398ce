"""Per-frame reduction of one sub-queue of a virtual queue, where its records are made: its
insertion, removal and producer-state records (raw ticks) in; one small summary per frame
(levels, counts, gap histograms, profiles) out, in a binary form a device can send instead."""

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
