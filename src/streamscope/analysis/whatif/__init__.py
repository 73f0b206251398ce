"""What if: the gain of a change predicted from one run, by simulating the pipeline it measured.

In: a ``Run`` of a pipeline that streamscope ran (its ``service`` and ``runner`` tables: each
stage's service times and CPU time per item; its topology; its stages' states; the monitor's
CPU), and changes (``Change.parse('walk*.replicas=12')``, ``'avg.speed=2x'``,
``'avg -> print.capacity=128'``, ``'cpus=4'``). Out: ``whatif(run, changes)``, a ``WhatIf``: the
model's self-check against the run it was built from, and (where the self-check holds) the
predicted throughput with an interval, each stage's states, each channel's occupancy and the
unit that would then limit the rate, beside the measured run.

The model (``model.network``): every stage a thread drawing its service time per item from its
measured samples (one item in 64, every item while they take 20 µs or more; at most 4096 a
stage), the CPU share of that time (its own code's CPU over wall, on some of those items)
holding its interpreter's lock and a core, plus the
runner's CPU per item (the thread's CPU time less its own code's) holding them too; outputs per
input as counted; channels with their capacities (a device's link: both its buffers, its
items handed out after the bus's transfer and latency); stages on threads of the pipeline's
process share one lock, those of one child process or device another; every process shares
the run's CPUs, with the monitor process, whose CPU time per item made is the run's.

A prediction is relative: the throughput predicted is the measured one times the ratio of the
changed model's to the unchanged model's, replication by replication with the same random
numbers (the interval: the 5th and 95th percentiles of that ratio over the replications, each
with its service samples drawn afresh). The unchanged model must first reproduce the run: its
throughput within the tolerance of the measured one (or of what the replications' spread
explains), each stage's busy share within ``STATE_TOLERANCE``, each channel's mean occupancy
within ``max(1 item, OCCUPANCY_TOLERANCE x capacity)``; a model that does not refuses to predict
and says which figure it missed.
"""

from __future__ import annotations

from streamscope.analysis.whatif.changes import apply_changes
from streamscope.analysis.whatif.kinds import (
    ATTRIBUTES,
    OCCUPANCY_TOLERANCE,
    REPLICATIONS,
    STATE_TOLERANCE,
    THROUGHPUT_TOLERANCE,
    Change,
    Check,
    Figures,
    PipelineModel,
    WhatIf,
    WhatIfError,
    unit_groups,
)
from streamscope.analysis.whatif.predict import Predictor, whatif
from streamscope.analysis.whatif.runmodel import pipeline_model, w1_levels

__all__ = [
    "ATTRIBUTES",
    "OCCUPANCY_TOLERANCE",
    "REPLICATIONS",
    "STATE_TOLERANCE",
    "THROUGHPUT_TOLERANCE",
    "Change",
    "Check",
    "Figures",
    "PipelineModel",
    "Predictor",
    "WhatIf",
    "WhatIfError",
    "apply_changes",
    "pipeline_model",
    "unit_groups",
    "w1_levels",
    "whatif",
]
