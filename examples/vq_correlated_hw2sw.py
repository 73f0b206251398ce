"""Virtual-queue micro-benchmark (Lancaster et al. 2011): a source with strongly
autocorrelated (AR(1)) inter-insertion times on the device: the self-check should reject the
i.i.d. model.

streamscope run examples/vq_correlated_hw2sw.py --ground-truth -- --seed 1 --items 4000
"""

from __future__ import annotations

import streamscope as ss
from vq import QUERIES, build

__all__ = ["QUERIES", "pipeline"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    # Below saturation (rho 0.6): the correlation, not full buffers, is what the model lacks.
    return build(
        argv, device="source", arrivals="ar1", service="exp", name="vq_correlated_hw2sw", rho=0.6
    )
