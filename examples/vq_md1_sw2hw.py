"""Virtual-queue micro-benchmark (Lancaster et al. 2011): M/D/1, server on the device: the bulk
transfers dominate its occupancy.

streamscope run examples/vq_md1_sw2hw.py --ground-truth -- --seed 1 --items 4000
"""

from __future__ import annotations

import streamscope as ss
from vq import QUERIES, build

__all__ = ["QUERIES", "pipeline"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv, device="server", arrivals="exp", service="const", name="vq_md1_sw2hw")
