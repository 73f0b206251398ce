"""Virtual-queue source with bursts (the on/off source of "Truth at the edges"): bursts of 60
items, 16x the mean rate inside, separated by idle gaps (~280 ms) longer than the 200 ms frame,
made on the device (hardware -> software).

i.i.d. gaps drawn from such a frame's histogram make bursts of geometric size at random places,
about twice the true occupancy; the device's insertion profile (insertions per sub-window) keeps
each burst where it was. Compare the frames' ``predicted_mean`` (the model used, ``arrivals`` =
profile) with ``renewal_mean`` (the i.i.d. model of Lancaster et al. 2011) and ``truth_mean``:

streamscope run examples/vq_bursty_hw2sw.py --ground-truth -- --seed 1 --items 600
"""

from __future__ import annotations

import streamscope as ss
from vq import build

__all__ = ["QUERIES", "pipeline"]

QUERIES = ["occupancy(source -> server): mean, max, histogram every 200ms"]


def pipeline(argv: list[str]) -> ss.Pipeline:
    return build(argv, device="source", arrivals="onoff", service="exp", name="vq_bursty_hw2sw",
                 rho=0.2)  # fmt: skip
