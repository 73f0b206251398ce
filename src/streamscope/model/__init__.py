"""Queue models: per-customer arrival and service times in, per-customer stage times and
time-weighted occupancy distributions out (the stochastic replay behind virtual queues)."""

from __future__ import annotations

from streamscope.model.bulk import BulkTandemTimes, bulk_transfer, tandem_bulk
from streamscope.model.occupancy import occupancy_from_events, tv, w1_items
from streamscope.model.recursions import (
    TandemTimes,
    blocking_fifo,
    lindley_fifo,
    tandem_blocking,
)

__all__ = [
    "BulkTandemTimes",
    "TandemTimes",
    "blocking_fifo",
    "bulk_transfer",
    "lindley_fifo",
    "occupancy_from_events",
    "tandem_blocking",
    "tandem_bulk",
    "tv",
    "w1_items",
]
