"""Virtual-queue micro-benchmark (Lancaster et al. 2011): M/M/1, server on the device (software -> hardware).

streamscope run examples/vq_mm1_sw2hw.py --ground-truth -- --seed 1 --items 4000
"""

from __future__ import annotations

import streamscope as ss
from vq import QUERIES, build

__all__ = ["QUERIES", "pipeline"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv, device="server", arrivals="exp", service="exp", name="vq_mm1_sw2hw")
