"""Queue models: per-customer arrival and service times in, per-customer stage times and
time-weighted occupancy distributions out (the stochastic replay behind virtual queues)."""

from __future__ import annotations

from streamscope.model._inputs import ModelInputError
from streamscope.model.bulk import BulkTandemTimes, bulk_transfer, tandem_bulk
from streamscope.model.dependence import Dependence, DependencePool, dependence_test
from streamscope.model.estimator import Prediction, condition, predict
from streamscope.model.occupancy import occupancy_from_events, tv, w1_items
from streamscope.model.recursions import (
    TandemTimes,
    blocking_fifo,
    lindley_fifo,
    tandem_blocking,
)
from streamscope.model.replay import Bus, SubQueues, simulate_frame
from streamscope.model.sampling import Profile, sample_histogram, sample_profile
from streamscope.model.selfcheck import (
    FrameVerdict,
    RunVerdict,
    combine_frames,
    self_check,
)

__all__ = [
    "BulkTandemTimes",
    "Bus",
    "Dependence",
    "DependencePool",
    "FrameVerdict",
    "ModelInputError",
    "Prediction",
    "Profile",
    "RunVerdict",
    "SubQueues",
    "TandemTimes",
    "blocking_fifo",
    "bulk_transfer",
    "combine_frames",
    "condition",
    "dependence_test",
    "lindley_fifo",
    "occupancy_from_events",
    "predict",
    "sample_histogram",
    "sample_profile",
    "self_check",
    "simulate_frame",
    "tandem_blocking",
    "tandem_bulk",
    "tv",
    "w1_items",
]
