"""Virtual-queue micro-benchmark (Lancaster et al. 2011): M/M/1, source on the device (hardware -> software).

streamscope run examples/vq_mm1_hw2sw.py --ground-truth -- --seed 1 --items 4000
"""

from __future__ import annotations

import streamscope as ss
from vq import QUERIES, build

__all__ = ["QUERIES", "pipeline"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv, device="source", arrivals="exp", service="exp", name="vq_mm1_hw2sw")
